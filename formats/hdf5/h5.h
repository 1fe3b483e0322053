#ifndef IOWARP_H5_H
#define IOWARP_H5_H
#include <stdlib.h>
#include <hdf5.h>
#include <hdf5_hl.h>

hid_t iw5_t_native(int k);
hid_t iw5_p_default(void);
hid_t iw5_p_dataset_create(void);
hid_t iw5_p_file_access(void);
hid_t iw5_e_default(void);
hsize_t iw5_unlimited(void);
void iw5_last_error(char *out, size_t n);
void iw5_quiet(void);
int iw5_obj_info(hid_t loc, const char *name, int *type, unsigned long long *key);
int iw5_hard_link(hid_t loc, const char *name);
int iw5_link_names(hid_t gid, char **out, size_t *len);
int iw5_scale_path(hid_t did, unsigned dim, char *buf);
hid_t iw5_vlen_str(void);
hid_t iw5_fixed_str(size_t n);
herr_t iw5_reclaim(hid_t type, hid_t space, void *buf);
char *iw5_str_at(char **v, size_t i);
void iw5_str_set(char **v, size_t i, char *s);
#endif
