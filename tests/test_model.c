#include <criterion/criterion.h>
Test(placeholder, model) { cr_assert(1); }
