#include <criterion/criterion.h>
Test(placeholder, rng) { cr_assert(1); }
