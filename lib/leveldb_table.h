/* LevelDB's table format ("SSTable"), which TensorFlow's tensor bundle
 * uses for its .index file: reader and writer (leveldb_table.c). Never
 * installed.
 *
 *   [data block]* [metaindex block] [index block] [footer 48 B]
 *
 * A block: entries (varint shared key bytes, varint unshared key bytes,
 * varint value bytes, key suffix, value), then the restart offsets (u32
 * each) and their count (u32); on disk it is followed by a 5-byte trailer:
 * the compression type (0 none, 1 Snappy) and the masked CRC32C of the
 * stored block and the type byte. The footer holds the block handles
 * (varint offset, varint size) of the metaindex and index blocks, zero
 * padding to 40 bytes and the magic 0xdb4775248b80fb57 (little-endian).
 * The index block maps a key ≥ every key of a data block (and < the next
 * block's) to its handle. All integers little-endian. */
#ifndef CAIRN_LEVELDB_TABLE_H
#define CAIRN_LEVELDB_TABLE_H

#include "interop_impl.h"

#define LDB_FOOTER 48u
#define LDB_TRAILER 5u
#define LDB_MAGIC 0xdb4775248b80fb57ull

/* 1 if the 48 bytes end with the table magic. */
int cairn__ldb_footer_magic(const unsigned char *footer);

/* One key-value of the table; pointers valid during the callback only. */
typedef struct ldb_kv {
  const unsigned char *key, *val;
  size_t klen, vlen;
  uint64_t block_at; /* file offset of the block holding it (messages) */
} ldb_kv;

typedef cairn_status (*ldb_fn)(void *ctx, const ldb_kv *kv);

/* Checks the whole table in the open file fd of size bytes (path feeds
 * messages), reading one block at a time: footer, every block's CRC
 * (before decompressing), Snappy sizes against max_block and against
 * 2 × size + 16 MiB (what the file can honestly expand to), block
 * structure and restarts, blocks tiling the file, keys strictly ascending
 * within and across blocks and not above their index key; calls fn for
 * each key-value in order and stops at its first error. Memory: the
 * largest block (stored and decoded) and the index block's keys. */
cairn_status cairn__ldb_read(const char *path, int fd, uint64_t size, uint64_t max_block, ldb_fn fn, void *ctx);

/* Writer: keys must be added in strictly ascending order. The table is
 * built in memory (an index holds small values). */
typedef struct ldb_writer {
  unsigned char *out; /* the file being built */
  size_t len, cap;
  unsigned char *blk; /* current data block */
  size_t blen, bcap;
  uint32_t *restarts;
  size_t nrestarts, rcap, since_restart;
  unsigned char *last; /* last key added */
  size_t lastlen, lastcap;
  unsigned char *index; /* index block entries, restart every entry */
  size_t ilen, icap;
  uint32_t *irestarts;
  size_t nirestarts, ircap;
  int snappy;     /* compress blocks with Snappy when it saves space */
  int failed;     /* out of memory */
} ldb_writer;

void cairn__ldb_writer_init(ldb_writer *w, int snappy);
/* 0 if ok, -1 out of memory. */
int cairn__ldb_writer_add(ldb_writer *w, const void *key, size_t klen, const void *val, size_t vlen);
/* Finishes the table: w->out[0..w->len) is the file. 0 if ok. */
int cairn__ldb_writer_finish(ldb_writer *w);
void cairn__ldb_writer_free(ldb_writer *w);

#endif
