#include <criterion/criterion.h>
Test(placeholder, saver) { cr_assert(1); }
