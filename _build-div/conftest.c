/* confdefs.h */
#define PACKAGE_NAME "cairn"
#define PACKAGE_TARNAME "cairn"
#define PACKAGE_VERSION "0.1.0"
#define PACKAGE_STRING "cairn 0.1.0"
#define PACKAGE_BUGREPORT ""
#define PACKAGE_URL ""
#define PACKAGE "cairn"
#define VERSION "0.1.0"
#define HAVE_STDIO_H 1
#define HAVE_STDLIB_H 1
#define HAVE_STRING_H 1
#define HAVE_INTTYPES_H 1
#define HAVE_STDINT_H 1
#define HAVE_STRINGS_H 1
#define HAVE_SYS_STAT_H 1
#define HAVE_SYS_TYPES_H 1
#define HAVE_UNISTD_H 1
#define STDC_HEADERS 1
#define HAVE_DLFCN_H 1
#define LT_OBJDIR ".libs/"
#define CAIRN_HAVE_OPENMP 1
#define CAIRN_HAVE_AVX2 1
#define CAIRN_HAVE_AVX512 1
#define HAVE_OPENBLAS_GET_PARALLEL 1
#define HAVE_OPENBLAS_GET_CORENAME 1
#define HAVE_OPENBLAS_SET_NUM_THREADS 1
#define HAVE_OPENBLAS_GET_CONFIG 1
/* end confdefs.h.  */

/* Override any GCC internal prototype to avoid an error.
   Use char because int might match the return type of a GCC
   builtin and then its argument prototype would still apply.  */
char dnnl_primitive_execute ();
int
main (void)
{
return dnnl_primitive_execute ();
  ;
  return 0;
}
