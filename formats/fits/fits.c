#include "fits.h"
#include <stdio.h>
#include <string.h>

int iwf_read_strings(fitsfile *f, int col, long long firstrow, long long nelem, int width, char *out, int *status) {
	char **ptrs = malloc(sizeof(char *) * (nelem > 0 ? nelem : 1));
	if (!ptrs) {
		*status = MEMORY_ALLOCATION;
		return *status;
	}
	for (long long i = 0; i < nelem; i++)
		ptrs[i] = out + i * (width + 1);
	int anynul = 0;
	char nul[1] = "";
	ffgcvs(f, col, firstrow, 1, nelem, nul, ptrs, &anynul, status);
	free(ptrs);
	return *status;
}

void iwf_errmsg(int status, char *buf, size_t n) {
	char text[FLEN_STATUS] = "", msg[FLEN_ERRMSG] = "", last[FLEN_ERRMSG] = "";
	ffgerr(status, text);
	while (ffgmsg(msg) > 0)
		memcpy(last, msg, sizeof(last));
	if (last[0])
		snprintf(buf, n, "%s: %s", text, last);
	else
		snprintf(buf, n, "%s", text);
}
