#include <criterion/criterion.h>
Test(placeholder, var) { cr_assert(1); }
