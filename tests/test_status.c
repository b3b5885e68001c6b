#include <criterion/criterion.h>
Test(placeholder, status) { cr_assert(1); }
