/* npz.h — the NumPy .npz writer of ckpt-inspect export: .npy arrays in a
 * ZIP file. (Import goes through libcairn: cairn_npz_reader_* in
 * cairn/interop.h, which reads with libzip and streams into a checkpoint.)
 *
 * Members stored uncompressed (ZIP method 0), .npy format 1.0 headers
 * ({'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }, padded so
 * that the data starts 64 bytes into the member, as NumPy does), ZIP64
 * records only where a size, an offset or the member count needs them,
 * CRC-32 from zlib, a fixed 1980-01-01 timestamp (exports are
 * reproducible). The archive is written to a temporary file in the
 * destination directory, fsynced and renamed into place on success.
 *
 * It is not written with libzip, as the reader is: libzip's zip_close
 * (1.7.3, Debian 12) writes its own temporary file and renames it without
 * an fsync, and reads every member's data only at close, from sources
 * that must all stay valid until then; this writer keeps
 * fsync-before-rename, byte-identical exports (fixed timestamps), and one
 * tensor in memory at a time.
 *
 * Errors: functions return 0 or -1 and put a message naming the file and
 * member in the caller's buffer.
 */
#ifndef CAIRN_TOOLS_NPZ_H
#define CAIRN_TOOLS_NPZ_H

#include <stddef.h>
#include <stdint.h>

#define NPZ_MAX_RANK 32

/* 1 when `name` is a safe relative ZIP member name: 1..65535 bytes of valid
 * UTF-8, no control characters, no backslash, not absolute, no empty, "."
 * or ".." component. */
int npz_name_is_safe(const char *name, size_t len);

typedef struct npz_writer npz_writer;

/* Starts an archive that becomes `path` on npz_writer_close. */
int npz_writer_open(const char *path, npz_writer **out, char *err, size_t errlen);
/* Adds member "<name>.npy" holding `data` (count × item size bytes in host
 * byte order, C order). descr is NumPy's dtype string for the host byte
 * order, e.g. "<f4" ("|b1", "|u1" for single bytes). */
int npz_writer_add(npz_writer *w, const char *name, const char *descr, int rank,
                   const int64_t *shape, const void *data, uint64_t nbytes, char *err,
                   size_t errlen);
/* Writes the central directory and end records, closes and renames the
 * file into place; frees w whatever the outcome. */
int npz_writer_close(npz_writer *w, char *err, size_t errlen);
/* Removes the temporary file and frees w; abort(NULL) does nothing. */
void npz_writer_abort(npz_writer *w);

/* 1 on a little-endian host. */
int npz_host_is_little(void);

#endif
