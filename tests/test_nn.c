#include <criterion/criterion.h>
Test(placeholder, nn) { cr_assert(1); }
