/* cairn/checkpoint_dir.h: the checkpoint directory as one object — the
 * lookup of the newest usable checkpoint with the candidates it tried,
 * the walk back past a damaged one, the rotation list without the files
 * marked corrupt, the lock, the directory's identity, and the Saver's
 * saves into one (cairn_saver_save_in, cairn/saver.h). */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cairn.h"
#include "rm_tree.h"

#define OK(expr) cr_assert_eq((expr), CAIRN_OK, "%s: %s", #expr, cairn_errmsg())
#define HAS(hay, needle) cr_assert_not_null(strstr((hay), (needle)), "'%s' lacks '%s'", (hay), (needle))

static char g_dir[256];

static void setup(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(g_dir, sizeof g_dir, "%s/cairn-ckptdir-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  cr_assert_not_null(mkdtemp(g_dir));
}

static void teardown(void) { rm_tree(g_dir); }

TestSuite(checkpoint_dir, .init = setup, .fini = teardown, .timeout = 60);

typedef struct model {
  cairn_registry *r;
  cairn_var *v;
  cairn_saver *s;
} model;

static void model_new(model *m, int max_to_keep) {
  OK(cairn_registry_new(7, &m->r));
  int64_t shape[1] = {64};
  OK(cairn_var_new(m->r, "w", CAIRN_DTYPE_F32, 1, shape, cairn_init_zeros(), CAIRN_COLL_GLOBAL, &m->v));
  OK(cairn_var_initialize(m->v));
  cairn_saver_options o = cairn_saver_options_default();
  o.write.no_fsync = 1;
  o.max_to_keep = max_to_keep;
  OK(cairn_saver_new(m->r, &o, &m->s));
}

static void model_free(model *m) {
  cairn_saver_free(m->s);
  cairn_registry_free(m->r);
}

/* Saves steps 1..n into g_dir as "model.ckpt-<step>", each with other values. */
static void save_steps(model *m, int n) {
  char prefix[300];
  snprintf(prefix, sizeof prefix, "%s/model.ckpt", g_dir);
  for (int k = 1; k <= n; k++) {
    ((float *)cairn_var_tensor(m->v)->data)[0] = (float)k;
    OK(cairn_saver_save(m->s, prefix, k, NULL, 0));
  }
}

/* Cuts the file to half its size: it no longer opens. */
static void truncate_half(const char *path) {
  struct stat sb;
  cr_assert_eq(stat(path, &sb), 0);
  cr_assert_eq(truncate(path, sb.st_size / 2), 0);
}

Test(checkpoint_dir, latest_lists_the_candidates_it_skipped) {
  model m;
  model_new(&m, 5);
  save_steps(&m, 3);
  char p3[300], p2[300];
  snprintf(p3, sizeof p3, "%s/model.ckpt-3", g_dir);
  snprintf(p2, sizeof p2, "%s/model.ckpt-2", g_dir);
  truncate_half(p3);
  cairn_checkpoint_dir *d;
  OK(cairn_checkpoint_dir_open(g_dir, NULL, &d));
  cr_assert_str_eq(cairn_checkpoint_dir_path(d), g_dir);
  char path[512], note[2048];
  cairn_ckpt *c = NULL;
  OK(cairn_checkpoint_dir_latest(d, path, sizeof path, note, sizeof note, &c));
  cr_assert_str_eq(path, p2);
  cr_assert_not_null(c);
  cairn_ckpt_close(c);
  HAS(note, "skipped '");
  /* newest first: the cut file with its reason, then the one chosen */
  cr_assert_eq(cairn_checkpoint_dir_candidate_count(d), 2);
  const char *cp, *why;
  OK(cairn_checkpoint_dir_candidate_at(d, 0, &cp, &why));
  cr_assert_str_eq(cp, p3);
  cr_assert_not_null(why);
  HAS(why, "truncated");
  OK(cairn_checkpoint_dir_candidate_at(d, 1, &cp, &why));
  cr_assert_str_eq(cp, p2);
  cr_assert_null(why);
  cr_assert_eq(cairn_checkpoint_dir_candidate_at(d, 2, &cp, &why), CAIRN_E_NOT_FOUND);
  /* the path form answers the same */
  char path2[512];
  OK(cairn_latest_checkpoint(g_dir, path2, sizeof path2));
  cr_assert_str_eq(path2, path);
  cairn_checkpoint_dir_close(d);
  model_free(&m);
}

Test(checkpoint_dir, next_intact_marks_and_walks_back_and_rotation_leaves_the_mark_out) {
  model m;
  model_new(&m, 5);
  save_steps(&m, 3);
  char p3[300], p2[300], p1[300];
  snprintf(p3, sizeof p3, "%s/model.ckpt-3", g_dir);
  snprintf(p2, sizeof p2, "%s/model.ckpt-2", g_dir);
  snprintf(p1, sizeof p1, "%s/model.ckpt-1", g_dir);
  cairn_checkpoint_dir *d;
  OK(cairn_checkpoint_dir_open(g_dir, NULL, &d));
  const cairn_checkpoint_state *st;
  OK(cairn_checkpoint_dir_state(d, &st));
  cr_assert_str_eq(cairn_checkpoint_state_model_path(st), p3);
  cr_assert_eq(cairn_checkpoint_dir_rotation_count(d), 3);
  char path[512];
  OK(cairn_checkpoint_dir_next_intact(d, p3, "a bad checksum in test", path, sizeof path));
  cr_assert_str_eq(path, p2);
  cr_assert(cairn_checkpoint_is_marked_corrupt(p3));
  /* the marked file stays on disk and out of the rotation list */
  cr_assert_eq(access(p3, F_OK), 0);
  cr_assert_eq(cairn_checkpoint_dir_rotation_count(d), 2);
  cr_assert_str_eq(cairn_checkpoint_dir_rotation_at(d, 0), p1);
  cr_assert_str_eq(cairn_checkpoint_dir_rotation_at(d, 1), p2);
  cr_assert_null(cairn_checkpoint_dir_rotation_at(d, 2));
  OK(cairn_checkpoint_dir_next_intact(d, p2, NULL, path, sizeof path));
  cr_assert_str_eq(path, p1);
  cr_assert_eq(cairn_checkpoint_dir_next_intact(d, p1, NULL, path, sizeof path), CAIRN_E_NOT_FOUND);
  HAS(cairn_errmsg(), "no usable checkpoint");
  cairn_checkpoint_dir_close(d);
  model_free(&m);
}

Test(checkpoint_dir, missing_state_file_is_an_answer_not_an_open_error) {
  cairn_checkpoint_dir *d;
  OK(cairn_checkpoint_dir_open(g_dir, NULL, &d));
  const cairn_checkpoint_state *st = (const cairn_checkpoint_state *)1;
  cr_assert_eq(cairn_checkpoint_dir_state(d, &st), CAIRN_E_NOT_FOUND);
  cr_assert_null(st);
  HAS(cairn_errmsg(), "checkpoint");
  cr_assert_eq(cairn_checkpoint_dir_rotation_count(d), 0);
  char path[64];
  cr_assert_eq(cairn_checkpoint_dir_latest(d, path, sizeof path, NULL, 0, NULL), CAIRN_E_NOT_FOUND);
  cairn_checkpoint_dir_close(d);
  char missing[300];
  snprintf(missing, sizeof missing, "%s/nothing", g_dir);
  cr_assert_eq(cairn_checkpoint_dir_open(missing, NULL, &d), CAIRN_E_NOT_FOUND);
  cr_assert_null(d);
  HAS(cairn_errmsg(), "checkpoint_dir_open: '");
  cairn_checkpoint_dir_close(NULL);
}

Test(checkpoint_dir, the_lock_is_one_writer_and_cleans_its_prefix_temporaries) {
  char tmp[300], other[300];
  snprintf(tmp, sizeof tmp, "%s/run.ckpt-12.tmp.a1B2c3", g_dir);
  snprintf(other, sizeof other, "%s/notes-2024.tmp.backup", g_dir);
  FILE *f = fopen(tmp, "w");
  fputs("half a checkpoint", f);
  fclose(f);
  f = fopen(other, "w");
  fclose(f);
  cairn_checkpoint_dir_options o = cairn_checkpoint_dir_options_default();
  o.lock = 1;
  o.prefix = "run.ckpt";
  cairn_checkpoint_dir *d, *d2 = NULL;
  OK(cairn_checkpoint_dir_open(g_dir, &o, &d));
  cr_assert(cairn_checkpoint_dir_lock_held(d));
  size_t files;
  uint64_t bytes;
  cairn_checkpoint_dir_removed(d, &files, &bytes);
  cr_assert_eq(files, 1);
  cr_assert_eq(bytes, 17);
  cr_assert_neq(access(tmp, F_OK), 0);
  cr_assert_eq(access(other, F_OK), 0);
  cr_assert_eq(cairn_checkpoint_dir_open(g_dir, &o, &d2), CAIRN_E_BUSY);
  cr_assert_null(d2);
  HAS(cairn_errmsg(), "is in use by another trainer");
  /* a reader takes no lock */
  OK(cairn_checkpoint_dir_open(g_dir, NULL, &d2));
  cr_assert_not(cairn_checkpoint_dir_lock_held(d2));
  cairn_checkpoint_dir_close(d2);
  cairn_checkpoint_dir_close(d);
  OK(cairn_checkpoint_dir_open(g_dir, &o, &d));
  cairn_checkpoint_dir_close(d);
  o.prefix = "../escape";
  cr_assert_eq(cairn_checkpoint_dir_open(g_dir, &o, &d), CAIRN_E_INVALID);
}

Test(checkpoint_dir, save_in_stops_when_the_directory_is_replaced) {
  model m;
  model_new(&m, 5);
  char run[300], moved[300];
  snprintf(run, sizeof run, "%s/run", g_dir);
  snprintf(moved, sizeof moved, "%s/moved", g_dir);
  cr_assert_eq(mkdir(run, 0777), 0);
  cairn_checkpoint_dir *d;
  OK(cairn_checkpoint_dir_open(run, NULL, &d));
  struct stat sb;
  cr_assert_eq(stat(run, &sb), 0);
  uint64_t dev, ino;
  cairn_checkpoint_dir_identity(d, &dev, &ino);
  cr_assert_eq(dev, (uint64_t)sb.st_dev);
  cr_assert_eq(ino, (uint64_t)sb.st_ino);
  char path[512];
  OK(cairn_saver_save_in(m.s, d, NULL, 1, path, sizeof path));
  char want[400];
  snprintf(want, sizeof want, "%s/model.ckpt-1", run);
  cr_assert_str_eq(path, want);
  OK(cairn_checkpoint_dir_verify(d));
  /* another directory in its place: nothing may be written into it */
  cr_assert_eq(rename(run, moved), 0);
  cr_assert_eq(mkdir(run, 0777), 0);
  cr_assert_eq(cairn_checkpoint_dir_verify(d), CAIRN_E_NOT_FOUND);
  HAS(cairn_errmsg(), "was replaced by another directory");
  cr_assert_eq(cairn_saver_save_in(m.s, d, NULL, 2, path, sizeof path), CAIRN_E_NOT_FOUND);
  HAS(cairn_errmsg(), "was replaced by another directory");
  cr_assert_eq(cairn_saver_save_begin_in(m.s, d, "model.ckpt", 2, path, sizeof path), CAIRN_E_NOT_FOUND);
  char state[400];
  snprintf(state, sizeof state, "%s/checkpoint", run);
  cr_assert_neq(access(state, F_OK), 0);
  cr_assert_eq(cairn_saver_save_in(m.s, d, "/abs/model.ckpt", 2, path, sizeof path), CAIRN_E_INVALID);
  cr_assert_eq(cairn_saver_save_in(m.s, NULL, NULL, 2, path, sizeof path), CAIRN_E_NULL);
  cairn_checkpoint_dir_close(d);
  model_free(&m);
}

/* A misspelled path: the closest entries of its directory, a TF bundle by
 * its prefix; nothing close, an unreadable directory and a tiny buffer give
 * "" and 0. */
Test(checkpoint_dir, suggest_names_the_closest_entries) {
  model m;
  model_new(&m, 0);
  save_steps(&m, 2);
  model_free(&m);
  char p[400], buf[300];
  snprintf(p, sizeof p, "%s/variables.index", g_dir);
  FILE *f = fopen(p, "w");
  cr_assert_not_null(f);
  fclose(f);
  snprintf(p, sizeof p, "%s/model.ckt-2", g_dir);
  cr_assert_geq(cairn_checkpoint_dir_suggest(p, buf, sizeof buf), 1);
  HAS(buf, "did you mean 'model.ckpt-2'");
  snprintf(p, sizeof p, "%s/varaibles", g_dir);
  cr_assert_eq(cairn_checkpoint_dir_suggest(p, buf, sizeof buf), 1);
  cr_assert_str_eq(buf, " (did you mean 'variables'?)");
  snprintf(p, sizeof p, "%s/zzzzzzzzzzzz", g_dir);
  cr_assert_eq(cairn_checkpoint_dir_suggest(p, buf, sizeof buf), 0);
  cr_assert_str_eq(buf, "");
  cr_assert_eq(cairn_checkpoint_dir_suggest("/nonexistent-dir-of-cairn/x", buf, sizeof buf), 0);
  cr_assert_str_eq(buf, "");
  cr_assert_eq(cairn_checkpoint_dir_suggest(NULL, buf, sizeof buf), 0);
}
