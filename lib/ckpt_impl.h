/* Private constants, byte helpers and parsers shared by the checkpoint
 * sources (crc32c.c, ckpt_format.c, ckpt_write.c, ckpt_native_open.c, ckpt_native.c,
 * ckpt_recover.c); never installed. The shared functions declared here are
 * in ckpt_format.c unless a section says otherwise. Field layouts are specified in doc/checkpoint-format.md. */
#ifndef CAIRN_CKPT_IMPL_H
#define CAIRN_CKPT_IMPL_H

#include "internal.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cairn/ckpt.h"
#include "test_seams.h" /* cairn__ckpt_last_threads, which test_ckpt.c reads */

/* ---- Sizes and constants (doc/checkpoint-format.md) ------------------------ */
#define CK_SUPER_SIZE 64u
#define CK_FOOTER_SIZE 64u
#define CK_REC_FIXED 52u  /* record header without shape and name */
#define CK_CHUNK_HDR 32u
#define CK_TRAILER 24u
#define CK_META_FIXED 20u /* tag, count, block_size, crc */
#define CK_INDEX_FIXED 20u /* tag, reserved, count, crc */
#define CK_IENTRY_FIXED 56u
#define CK_ICHUNK 16u
#define CK_MAX_NAME 1024u
#define CK_MAX_KEY 255u
#define CK_MAX_DIM ((uint64_t)1 << 62)
#define CK_MIN_CHUNK 64u
#define CK_MAX_CHUNK (64u << 20)
#define CK_MAX_ALIGN (1u << 20)
#define CK_DEFAULT_CHUNK (1u << 20)
#define CK_DEFAULT_ALIGN 64u
/* Below this much work (bytes) chunks are encoded/decoded on the calling
 * thread: waking OpenMP workers costs more than it saves, and idle workers
 * spinning on a busy machine slow everything else down. */
#define CK_PAR_MIN_BYTES ((uint64_t)1 << 20)
#define CK_MAX_REC_HDR (CK_REC_FIXED + 8u * CAIRN_MAX_RANK + CK_MAX_NAME)

#define CK_LAYOUT_CHUNKED 0
#define CK_LAYOUT_RAW 1
#define CK_CODEC_RAW 0
#define CK_CODEC_LZ4 1
#define CK_CODEC_SHUF_LZ4 2
#define CK_CODEC_SHUF_ZSTD 3
#define CK_CODEC_MAX CK_CODEC_SHUF_ZSTD
#define CK_FLAG_COMPLETE 1u
/* Required feature bits (superblock offset 16). Format 1.1: codec 3. */
#define CK_FEAT_ZSTD 0x1u
#define CK_KNOWN_REQUIRED CK_FEAT_ZSTD /* required feature bits this reader understands */
/* Codec 3: zstd level, smallest window log, largest block (zstd's format). */
#define CK_ZSTD_LEVEL 1
#define CK_ZSTD_MIN_WLOG 10u
#define CK_ZSTD_BLOCK (128u << 10)
#define CK_BOM 0x01020304u
#define CK_DTYPE_MAX 13

#define CK_MAGIC "\x89" "CRN\r\n\x1a\n"
#define CK_TAG_REC "CRNT"
#define CK_TAG_CHUNK "CRNC"
#define CK_TAG_TRAILER "CRNE"
#define CK_TAG_META "CRNM"
#define CK_TAG_INDEX "CRNI"
#define CK_TAG_FOOTER "CRNF"

/* Default limits (ckpt.h). */
#define CK_DEF_MAX_INDEX ((uint64_t)256 << 20)
#define CK_DEF_MAX_META ((uint64_t)16 << 20)
#define CK_DEF_MAX_TENSORS ((uint64_t)1000000)
#define CK_DEF_MAX_CHUNK ((uint64_t)64 << 20)
#define CK_DEF_MAX_TENSOR ((uint64_t)64 << 30)

/* ---- Little-endian fields ---------------------------------------------------- */
static inline uint16_t ck_get16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t ck_get32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t ck_get64(const unsigned char *p) { return ck_get32(p) | (uint64_t)ck_get32(p + 4) << 32; }
static inline void ck_put16(unsigned char *p, uint16_t v) {
  p[0] = (unsigned char)v;
  p[1] = (unsigned char)(v >> 8);
}
static inline void ck_put32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline void ck_put64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline int ck_all_zero(const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i]) return 0;
  return 1;
}

static inline int ck_host_big_endian(void) {
#if defined(__BYTE_ORDER__) && defined(__ORDER_BIG_ENDIAN__)
  return __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__;
#else
  const uint16_t one = 1;
  unsigned char b;
  memcpy(&b, &one, 1);
  return b == 0;
#endif
}

/* ---- CRC32C (crc32c.c) ------------------------------------------------------ */
/* TensorFlow/LevelDB masking of stored CRCs. */
static inline uint32_t ck_mask(uint32_t c) { return ((c >> 15) | (c << 17)) + 0xa282ead8u; }
static inline uint32_t ck_unmask(uint32_t m) {
  uint32_t r = m - 0xa282ead8u;
  return (r >> 17) | (r << 15);
}
void cairn__crc32c_init(void);
uint32_t cairn__crc32c_sw(uint32_t crc, const void *data, size_t len);
/* The SSE4.2 path (the table when the CPU lacks SSE4.2), whatever CAIRN_ISA says. */
uint32_t cairn__crc32c_hw(uint32_t crc, const void *data, size_t len);
int cairn__crc32c_hw_available(void);
const char *cairn__crc32c_impl_name(void); /* "sse4.2" or "table": what cairn_crc32c uses */
/* CRC of A‖B from crc(A), crc(B) and |B|. */
uint32_t cairn__crc32c_combine(uint32_t crc1, uint32_t crc2, uint64_t len2);
/* Masked CRC32C of p[0..n). */
static inline uint32_t ck_crc_masked(const void *p, size_t n) { return ck_mask(cairn_crc32c(0, p, n)); }

/* ---- Parsed structures -------------------------------------------------------- */
typedef struct ck_super {
  int major, minor;
  uint32_t required, optional, alignment, chunk_bytes;
  unsigned char file_id[16];
} ck_super;

typedef struct ck_footer {
  int major, minor;
  uint64_t meta_offset, meta_size, index_size, count;
  uint32_t flags;
  unsigned char file_id[16];
} ck_footer;

typedef struct ck_rec {
  uint32_t seq, n_chunks, size; /* size: header bytes */
  uint16_t name_len;
  uint8_t dtype, rank, layout;
  uint64_t raw_bytes;
  uint64_t shape[CAIRN_MAX_RANK];
  const unsigned char *name; /* into the caller's buffer */
} ck_rec;

typedef struct ck_chunk {
  uint32_t seq, chunk_no, raw, stored, data_crc; /* data_crc unmasked */
  uint8_t codec;
} ck_chunk;

typedef struct ck_meta {
  const char *key; /* NUL-terminated, in the parser's arena */
  cairn_meta_type type;
  uint64_t num;    /* u64, i64 and f64 bits, bool */
  const char *ptr; /* string (NUL-terminated) or bytes, in the arena */
  size_t len;
} ck_meta;

/* One chunk of the index's chunk table (16 bytes in the file). */
typedef struct ck_chunk_ent {
  uint8_t codec;
  uint32_t raw, stored, crc; /* crc unmasked */
} ck_chunk_ent;

/* One index entry (56 bytes + shape + name + chunk table in the file), as
 * the writer builds it and the reader parses it. */
typedef struct ck_entry {
  char *name; /* NUL-terminated: the writer's own copy, or in the reader's name arena */
  uint16_t name_len;
  uint8_t dtype, rank, layout;
  uint32_t seq, n_chunks;
  uint64_t shape[CAIRN_MAX_RANK];
  uint64_t record_offset, data_offset, raw_bytes, stored_bytes;
  uint32_t raw_crc;                  /* unmasked */
  ck_chunk_ent *chunks;              /* writer: the chunk table being filled */
  const unsigned char *chunk_table;  /* reader: the chunk table in its copy of the index */
  uint64_t index_at;                 /* reader: offset of the entry in the file (messages) */
} ck_entry;

/* The fixed 56 bytes of an index entry: put writes them (reserved bytes
 * zero), get reads them and returns 0 if a reserved byte is not zero. */
void cairn__ck_entry_put(unsigned char *p, const ck_entry *e);
int cairn__ck_entry_get(const unsigned char *p, ck_entry *e);

/* ---- Checks shared by writer, reader and salvage ------------------------------- */
/* 1 if s[0..len) is UTF-8 (no overlongs, no surrogates, ≤ U+10FFFF); with
 * no_controls also without U+0000–U+001F and U+007F–U+009F; NUL is always refused. */
int cairn__ck_utf8_ok(const unsigned char *s, size_t len, int no_controls);
/* Tensor names: 1..1024 bytes, UTF-8, no control characters. */
int cairn__ck_name_ok(const unsigned char *s, size_t len);
/* Metadata keys: 1..255 bytes of [a-z0-9_.]. */
int cairn__ck_key_ok(const unsigned char *s, size_t len);
/* Element size of a format dtype value, 0 if unknown. */
size_t cairn__ck_esize(unsigned dtype);
/* n_chunks and the raw size of chunk k for a tensor of raw bytes. */
uint64_t cairn__ck_nchunks(uint64_t raw, uint32_t chunk_bytes);
static inline uint32_t ck_chunk_raw(uint64_t raw, uint32_t chunk_bytes, uint64_t k) {
  uint64_t lo = k * chunk_bytes;
  return (uint32_t)(raw - lo < chunk_bytes ? raw - lo : chunk_bytes);
}
/* Codec/size rule R17 for one chunk: 1 if ok. */
int cairn__ck_chunk_sizes_ok(unsigned codec, uint32_t raw, uint32_t stored);
/* Short text for a name in messages: the first bytes, "..." if cut. */
const char *cairn__ck_short(const char *name, size_t len, char *buf, size_t cap);

/* ---- Chunk decoding ------------------------------------------------------------ */
/* Decodes one chunk's stored bytes src into dst (raw bytes); 0 if they
 * decode to exactly raw bytes. Codecs 2 and 3 decode the byte planes into
 * scratch (raw bytes, overlapping neither src nor dst) and interleave them
 * into dst with the unshuffle kernel (cairn__kernels()); for them dst may
 * be src's own buffer. Codec 0 copies unless dst == src; codec 1 decodes
 * into dst, which must not overlap src, and leaves scratch alone. */
int cairn__ck_decode(unsigned codec, size_t esize, const unsigned char *src, uint32_t stored, unsigned char *dst,
                     uint32_t raw, unsigned char *scratch);
/* Codecs whose stored bytes are byte planes (they need cairn__ck_decode's scratch). */
static inline int ck_codec_planes(unsigned codec) {
  return codec == CK_CODEC_SHUF_LZ4 || codec == CK_CODEC_SHUF_ZSTD;
}

/* ---- Codec 3, zstd part (ckpt_codec_zstd.c) ------------------------------------ */
/* Largest window log a codec-3 chunk of raw bytes may use: ceil(log2(raw)), at least 10. */
unsigned cairn__ck_zstd_window_log(uint32_t raw);
/* Smallest stored size of a valid frame of raw bytes: 6 + 4·ceil(raw / 128 KiB). */
uint64_t cairn__ck_zstd_min_stored(uint32_t raw);
/* Decodes one frame into exactly raw bytes: 0 ok, -1 invalid (the frame
 * rules of doc/checkpoint-format.md, window included), -2 out of memory. */
int cairn__ck_zstd_decode(const unsigned char *src, uint32_t stored, unsigned char *dst, uint32_t raw);
/* Compression contexts (level 1, content size in the frame, no checksum, no dictionary id). */
void *cairn__ck_zstd_cctx_new(void);
void cairn__ck_zstd_cctx_free(void *cctx);
/* One frame of the byte planes src (es planes of raw / es bytes, each
 * ending a zstd block): the stored size (< raw, ≤ cap), or 0 when the chunk
 * is better stored raw. */
size_t cairn__ck_zstd_encode(void *cctx, unsigned char *dst, size_t cap, const unsigned char *src, uint32_t raw,
                             size_t es);

/* ---- Parsers. `path` and offsets only feed messages. ------------------------------ */
/* "the file is incomplete ...; 'ckpt-inspect recover' can salvage ..." */
extern const char *const cairn__ck_recover_hint;
/* The check that ends every block of the format (superblock, footer,
 * headers, trailer, metadata, index): the 4 bytes at buf + crc_at are the
 * masked CRC32C of buf[0..crc_at). CAIRN_E_CORRUPT "'<path>' offset <off>:
 * <what> checksum mismatch (stored 1234abcd, computed ...)". */
cairn_status cairn__ck_check_crc(const char *path, uint64_t off, const char *what, const unsigned char *buf,
                                 size_t crc_at);
/* Length-delimited byte strings in memcmp order, shorter first: the order of
 * index names and metadata keys. */
int cairn__ck_cmp_bytes(const void *a, size_t na, const void *b, size_t nb);
/* Superblock rules R1–R6 on buf[0..avail) (avail may be < 64 for a short file). */
cairn_status cairn__ck_parse_super(const char *path, const unsigned char *buf, size_t avail, uint64_t max_chunk,
                                   ck_super *sb);
/* Footer rules R7–R10; buf is the last 64 bytes of a file of file_size ≥ 128. */
cairn_status cairn__ck_parse_footer(const char *path, const unsigned char *buf, uint64_t file_size,
                                    const ck_super *sb, ck_footer *ft);
/* Record header at `off`: buf holds avail bytes from there. Checks tag, CRC,
 * file_id, reserved, name, dtype, rank, layout, dims, raw_bytes and n_chunks.
 * CAIRN_E_TRUNCATED when avail is too short for the header. */
cairn_status cairn__ck_parse_rec(const char *path, uint64_t off, const unsigned char *buf, size_t avail,
                                 const ck_super *sb, uint64_t max_tensor, ck_rec *r);
/* Chunk header (32 bytes at off): tag, CRC, reserved, codec known. */
cairn_status cairn__ck_parse_chunk(const char *path, uint64_t off, const unsigned char *buf, ck_chunk *c);
/* Trailer (24 bytes at off): tag and CRC; returns seq, raw_bytes, raw_crc (unmasked). */
cairn_status cairn__ck_parse_trailer(const char *path, uint64_t off, const unsigned char *buf, uint32_t *seq,
                                     uint64_t *raw_bytes, uint32_t *raw_crc);
/* Metadata block (rules R12, R13, R18) from a private copy blk[0..size) read
 * at `off`. *out / *arena are malloc'd (free both). */
cairn_status cairn__ck_parse_meta(const char *path, uint64_t off, const unsigned char *blk, uint64_t size,
                                  ck_meta **out, size_t *n, char **arena);

/* pread of exactly len bytes (retrying short reads and EINTR). End of file:
 * CAIRN_E_TRUNCATED; errors: CAIRN_E_IO. `what` names the part in messages. */
cairn_status cairn__ck_pread(int fd, void *buf, size_t len, uint64_t off, const char *path, const char *what);
/* The same without a message: 0 ok, 1 end of file first, -1 error (*err = errno). */
int cairn__ck_pread_raw(int fd, void *buf, size_t len, uint64_t off, int *err);

/* ---- Writer internals used by salvage (ckpt_write.c) ------------------------------ */
/* A record written piece by piece: begin, then chunks (layout 0) or payload
 * pieces (layout 1), then end. Chunk/payload bytes are written before the
 * call returns (the caller may reuse its buffer). data_crc is unmasked and
 * is checked against the bytes written (CAIRN_E_CORRUPT if they differ). */
cairn_status cairn__ck_rec_begin(cairn_ckpt_writer *w, const char *name, cairn_dtype dt, int rank,
                                 const int64_t *shape, int layout);
cairn_status cairn__ck_rec_chunk(cairn_ckpt_writer *w, unsigned codec, uint32_t raw, const void *stored,
                                 uint32_t stored_size, uint32_t data_crc);
cairn_status cairn__ck_rec_payload(cairn_ckpt_writer *w, const void *data, size_t len);
cairn_status cairn__ck_rec_end(cairn_ckpt_writer *w, uint32_t raw_crc);
/* Opens a writer with exactly this chunk size and alignment (salvage keeps
 * the input's, so that chunks can be copied as stored). */
cairn_status cairn__ck_writer_open_raw(const char *path, uint32_t chunk_bytes, uint32_t alignment, int no_fsync,
                                       cairn_ckpt_writer **out);

#endif
