#include <criterion/criterion.h>
Test(placeholder, data) { cr_assert(1); }
