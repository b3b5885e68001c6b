/* npz.h — a small, defensive reader and writer of NumPy .npy arrays in
 * .npz archives (ZIP files), for ckpt-inspect's export and import.
 *
 * Writer: members stored uncompressed (ZIP method 0), .npy format 1.0
 * headers ({'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), },
 * padded so that the data starts 64 bytes into the member, as NumPy does),
 * ZIP64 records only where a size, an offset or the member count needs
 * them, CRC-32 from zlib. The archive is written to a temporary file in the
 * destination directory and renamed into place on success.
 *
 * Reader: the end-of-central-directory record (and its ZIP64 variant), the
 * central directory and every local header are checked against the file's
 * size and against each other before anything is trusted: single-disk
 * archives only, members in bounds and not overlapping, the central
 * directory after the members, local and central names and methods equal,
 * no encryption, methods 0 (stored) or 8 (deflate, inflated with zlib's raw
 * inflate into a buffer that starts at 1 MiB and doubles as output arrives,
 * up to the declared size and never beyond, so memory follows the data
 * actually present, not the headers' claim; members over 1 GiB and ZIP64
 * sizes included), CRC-32
 * and sizes checked, member names without path tricks (absolute paths,
 * "..", ".", empty components, backslashes, control characters, invalid
 * UTF-8). .npy headers (versions 1.0, 2.0, 3.0) are parsed by a strict
 * parser of the dict literal NumPy writes (at most 10,000 bytes, exactly
 * the keys descr, fortran_order and shape), and the data must be exactly
 * shape × item size bytes. Every allocation is bounded by npz_limits.
 *
 * Errors: functions return 0 or -1 and put a message naming the file and
 * member in the caller's buffer.
 */
#ifndef CAIRN_TOOLS_NPZ_H
#define CAIRN_TOOLS_NPZ_H

#include <stddef.h>
#include <stdint.h>

#define NPZ_MAX_RANK 32  /* NumPy's limit is 64; cairn's is 8, checked by the caller */

/* One element type NumPy can describe with a simple descr string. */
typedef enum npz_kind {
  NPZ_KIND_FLOAT = 'f',
  NPZ_KIND_INT = 'i',
  NPZ_KIND_UINT = 'u',
  NPZ_KIND_BOOL = 'b'
} npz_kind;

/* A decoded array: data in C order and host byte order (the reader
 * byte-swaps big-endian members and transposes fortran_order ones). */
typedef struct npz_array {
  char descr[16];          /* as found in the file, e.g. "<f4" */
  npz_kind kind;
  int itemsize;            /* 1, 2, 4 or 8 */
  int rank;
  int64_t shape[NPZ_MAX_RANK];
  uint64_t count;          /* product of shape */
  void *data;              /* count * itemsize bytes; free with npz_array_free */
  void *block_;            /* the allocation behind data */
} npz_array;

void npz_array_free(npz_array *a);

/* ---- Reading ---------------------------------------------------------------- */

typedef struct npz_limits {
  uint64_t max_member_bytes;  /* uncompressed size of one member; 0: 64 GiB
                                 (the cairn reader's default tensor limit).
                                 Caps the buffer of a member, which grows
                                 only as its data arrives */
  uint64_t max_members;       /* 0: 1,000,000 */
} npz_limits;

typedef struct npz_reader npz_reader;

/* Opens `path` and validates its ZIP structure (not the members' contents:
 * see npz_reader_read). limits may be NULL. */
int npz_reader_open(const char *path, const npz_limits *limits, npz_reader **out, char *err,
                    size_t errlen);
void npz_reader_close(npz_reader *r);
/* Members in central-directory order; names as stored ("dense/w.npy"). */
size_t npz_reader_count(const npz_reader *r);
const char *npz_reader_name(const npz_reader *r, size_t i);
/* Reads member i: decompresses, checks CRC-32 and sizes, parses the .npy
 * header and returns the array. */
int npz_reader_read(npz_reader *r, size_t i, npz_array *out, char *err, size_t errlen);

/* 1 when `name` is a safe relative ZIP member name: 1..65535 bytes of valid
 * UTF-8, no control characters, no backslash, not absolute, no empty, "."
 * or ".." component. */
int npz_name_is_safe(const char *name, size_t len);

/* ---- Writing ---------------------------------------------------------------- */

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
