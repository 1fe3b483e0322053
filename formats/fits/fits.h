/* Thin helpers over cfitsio for formats/fits (what cgo cannot call
 * directly: arrays of C strings). */
#include <fitsio.h>
#include <stdlib.h>

/* iwf_read_strings reads nelem strings of column col from firstrow (1-based),
 * each into width+1 bytes of out (NUL-terminated, trailing blanks stripped
 * by cfitsio). */
int iwf_read_strings(fitsfile *f, int col, long long firstrow, long long nelem, int width, char *out, int *status);

/* iwf_errmsg fills buf (n bytes) with the status text and the deepest
 * message of cfitsio's error stack, then clears the stack. */
void iwf_errmsg(int status, char *buf, size_t n);
