// C helpers of package hdf5: wrappers for macros cgo cannot expand and
// callbacks libhdf5 needs. Compiled by cgo with the package.
#include "h5.h"
#include <string.h>
#include <stdio.h>

hid_t iw5_t_native(int k) {
	switch (k) {
	case 0: return H5T_NATIVE_SCHAR;
	case 1: return H5T_NATIVE_UCHAR;
	case 2: return H5T_NATIVE_SHORT;
	case 3: return H5T_NATIVE_USHORT;
	case 4: return H5T_NATIVE_INT;
	case 5: return H5T_NATIVE_UINT;
	case 6: return H5T_NATIVE_LLONG;
	case 7: return H5T_NATIVE_ULLONG;
	case 8: return H5T_NATIVE_FLOAT;
	case 9: return H5T_NATIVE_DOUBLE;
	case 10: return H5T_C_S1;
	case 11: return H5T_STD_I8LE;
	case 12: return H5T_STD_U8LE;
	case 13: return H5T_STD_I16LE;
	case 14: return H5T_STD_U16LE;
	case 15: return H5T_STD_I32LE;
	case 16: return H5T_STD_U32LE;
	case 17: return H5T_STD_I64LE;
	case 18: return H5T_STD_U64LE;
	case 19: return H5T_IEEE_F32LE;
	case 20: return H5T_IEEE_F64LE;
	}
	return -1;
}

hid_t iw5_p_default(void) { return H5P_DEFAULT; }
hid_t iw5_p_dataset_create(void) { return H5Pcreate(H5P_DATASET_CREATE); }
hid_t iw5_p_file_access(void) { return H5Pcreate(H5P_FILE_ACCESS); }
hid_t iw5_e_default(void) { return H5E_DEFAULT; }
hsize_t iw5_unlimited(void) { return H5S_UNLIMITED; }

typedef struct { char msg[768]; } errbuf;

static herr_t walk_cb(unsigned n, const H5E_error2_t *e, void *data) {
	errbuf *eb = data;
	if (e->desc && e->desc[0])
		snprintf(eb->msg, sizeof eb->msg, "%s (%s)", e->desc, e->func_name ? e->func_name : "?");
	return 0;
}

// last_error copies the deepest message of the error stack and clears it.
void iw5_last_error(char *out, size_t n) {
	errbuf eb;
	eb.msg[0] = 0;
	H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, walk_cb, &eb);
	strncpy(out, eb.msg, n - 1);
	out[n - 1] = 0;
	H5Eclear2(H5E_DEFAULT);
}

void iw5_quiet(void) {
	H5open();
	H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
	H5PLset_loading_state(0);
}

// obj_info: type and a file-unique key of the object name in loc.
int iw5_obj_info(hid_t loc, const char *name, int *type, unsigned long long *key) {
#if H5_VERSION_GE(1, 12, 0)
	H5O_info2_t info;
	if (H5Oget_info_by_name3(loc, name, &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0) return -1;
	memcpy(key, &info.token, sizeof *key);
#else
	H5O_info_t info;
	if (H5Oget_info_by_name2(loc, name, &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0) return -1;
	*key = info.addr;
#endif
	*type = info.type;
	return 0;
}

int iw5_hard_link(hid_t loc, const char *name) {
#if H5_VERSION_GE(1, 12, 0)
	H5L_info2_t li;
	if (H5Lget_info2(loc, name, &li, H5P_DEFAULT) < 0) return -1;
#else
	H5L_info_t li;
	if (H5Lget_info(loc, name, &li, H5P_DEFAULT) < 0) return -1;
#endif
	return li.type == H5L_TYPE_HARD;
}

static herr_t first_scale(hid_t did, unsigned dim, hid_t dsid, void *data) {
	char *buf = data;
	if (H5Iget_name(dsid, buf, 1024) < 0) buf[0] = 0;
	return 1;
}

// scale_path writes the path of the first dimension scale attached to
// axis dim of did into buf (1024 bytes); 0 if there is none.
int iw5_scale_path(hid_t did, unsigned dim, char *buf) {
	buf[0] = 0;
	if (H5DSget_num_scales(did, dim) <= 0) return 0;
	if (H5DSiterate_scales(did, dim, NULL, first_scale, buf) < 0) return -1;
	return buf[0] != 0;
}

hid_t iw5_vlen_str(void) {
	hid_t t = H5Tcopy(H5T_C_S1);
	H5Tset_size(t, H5T_VARIABLE);
	H5Tset_cset(t, H5T_CSET_UTF8);
	return t;
}

hid_t iw5_fixed_str(size_t n) {
	hid_t t = H5Tcopy(H5T_C_S1);
	H5Tset_size(t, n);
	H5Tset_strpad(t, H5T_STR_NULLPAD);
	return t;
}

herr_t iw5_reclaim(hid_t type, hid_t space, void *buf) {
	return H5Dvlen_reclaim(type, space, H5P_DEFAULT, buf);
}

char *iw5_str_at(char **v, size_t i) { return v[i]; }
void iw5_str_set(char **v, size_t i, char *s) { v[i] = s; }

typedef struct { char *buf; size_t len, cap; int err; } names;

#if H5_VERSION_GE(1, 12, 0)
static herr_t name_cb(hid_t g, const char *name, const H5L_info2_t *info, void *data) {
#else
static herr_t name_cb(hid_t g, const char *name, const H5L_info_t *info, void *data) {
#endif
	names *ns = data;
	size_t n = strlen(name) + 1;
	if (ns->len + n > ns->cap) {
		size_t cap = ns->cap ? ns->cap * 2 : 4096;
		while (cap < ns->len + n) cap *= 2;
		char *b = realloc(ns->buf, cap);
		if (!b) { ns->err = 1; return -1; }
		ns->buf = b, ns->cap = cap;
	}
	memcpy(ns->buf + ns->len, name, n);
	ns->len += n;
	return 0;
}

// link_names lists the link names of group gid in one pass (H5Literate,
// name order), NUL-separated, into *out (malloc'ed; the caller frees it)
// of *len bytes. Asking for each name by index instead costs a walk of
// the group per name on old-style groups: N² for N links.
int iw5_link_names(hid_t gid, char **out, size_t *len) {
	names ns = {0};
	hsize_t idx = 0;
#if H5_VERSION_GE(1, 12, 0)
	herr_t r = H5Literate2(gid, H5_INDEX_NAME, H5_ITER_INC, &idx, name_cb, &ns);
#else
	herr_t r = H5Literate(gid, H5_INDEX_NAME, H5_ITER_INC, &idx, name_cb, &ns);
#endif
	if (r < 0 || ns.err) {
		free(ns.buf);
		return -1;
	}
	*out = ns.buf, *len = ns.len;
	return 0;
}
