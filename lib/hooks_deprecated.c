/* The names of cairn 0.1 for the built-in hooks (doc/deprecated.md): each
 * calls its cairn_hook_new_<kind> for one release, so a program written for
 * 0.1 still builds and links. Their messages name the new call. */
#include "internal.h"

#include <stddef.h>
#include <string.h>

#include "cairn/monitored.h"
#include "cairn/summary.h"
#include "hook_impl.h"

cairn_status cairn_stop_at_step_hook_new(int64_t num_steps, int64_t last_step, cairn_hook **out) {
  return cairn__hook_new_stop_at_step(num_steps, last_step, out);
}

/* 0.1 had no default: exactly one of the two must be > 0 (a negative one
 * meant None, which the options spell 0). */
cairn_status cairn_step_counter_hook_new(int64_t every_n_steps, double every_n_secs, cairn_summary_writer *writer,
                                         const cairn_env *env, cairn_hook **out) {
  if (out) *out = NULL;
  if ((every_n_steps > 0) == (every_n_secs > 0))
    return cairn__fail(CAIRN_E_INVALID, "exactly one of every_n_steps and every_n_secs should be provided.");
  cairn_step_counter_hook_options o = cairn_step_counter_hook_options_default();
  o.every_n_steps = every_n_steps > 0 ? every_n_steps : 0;
  o.every_n_secs = every_n_secs > 0 ? every_n_secs : 0;
  o.summary_writer = writer;
  o.env = env;
  return cairn_hook_new_step_counter(&o, out);
}

cairn_status cairn_nan_tensor_hook_new(const char *loss_name, int fail_on_nan_loss, cairn_hook **out) {
  cairn_nan_tensor_hook_options o = cairn_nan_tensor_hook_options_default();
  o.warn_only = !fail_on_nan_loss;
  return cairn_hook_new_nan_tensor(loss_name, &o, out);
}

cairn_status cairn_final_ops_hook_new(cairn_op *final_op, const char *const *names, size_t n_names,
                                      const cairn_feed *feeds, size_t n_feeds, cairn_hook **out) {
  cairn_final_ops_hook_options o = cairn_final_ops_hook_options_default();
  o.feeds = feeds;
  o.n_feeds = n_feeds;
  return cairn_hook_new_final_ops(final_op, names, n_names, &o, out);
}

cairn_status cairn_global_step_waiter_hook_new(int64_t wait_until_step, const cairn_env *env, cairn_hook **out) {
  cairn_global_step_waiter_hook_options o = cairn_global_step_waiter_hook_options_default();
  o.env = env;
  return cairn_hook_new_global_step_waiter(wait_until_step, &o, out);
}

cairn_status cairn_feed_fn_hook_new(cairn_feed_fn fn, void *user, cairn_hook **out) {
  return cairn_hook_new_feed_fn(fn, user, out);
}

/* 0.1 had checkpoint_dir inside the options, and a struct without
 * struct_size: it is read as far as 0.1's layout went. */
cairn_status cairn_checkpoint_saver_hook_new(const cairn_checkpoint_saver_hook_options *o, cairn_hook **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "hook_new_checkpoint_saver: out is NULL");
  *out = NULL;
  if (!o || !o->checkpoint_dir)
    return cairn__fail(CAIRN_E_NULL, "hook_new_checkpoint_saver: %s is NULL", o ? "checkpoint_dir" : "options");
  cairn_checkpoint_saver_hook_options c = cairn_checkpoint_saver_hook_options_default();
  memcpy(&c, o, offsetof(cairn_checkpoint_saver_hook_options, struct_size));
  c.checkpoint_dir = NULL;
  return cairn_hook_new_checkpoint_saver(o->checkpoint_dir, &c, out);
}

/* 0.1 had the names inside the options (n_names 0 with names NULL was
 * allowed), and a struct without struct_size: it is read as far as 0.1's
 * layout went. */
cairn_status cairn_logging_tensor_hook_new(const cairn_logging_tensor_hook_options *o, cairn_hook **out) {
  static const char *const no_names[1] = {NULL};
  if (!out) return cairn__fail(CAIRN_E_NULL, "hook_new_logging_tensor: out is NULL");
  *out = NULL;
  if (!o) return cairn__fail(CAIRN_E_NULL, "hook_new_logging_tensor: options are NULL");
  if (o->n_names && !o->names) return cairn__fail(CAIRN_E_NULL, "hook_new_logging_tensor: names is NULL");
  cairn_logging_tensor_hook_options c = cairn_logging_tensor_hook_options_default();
  memcpy(&c, o, offsetof(cairn_logging_tensor_hook_options, struct_size));
  c.names = NULL;
  c.n_names = 0;
  return cairn_hook_new_logging_tensor(o->names ? o->names : no_names, o->n_names, &c, out);
}

cairn_status cairn_summary_saver_hook_new(const cairn_summary_saver_hook_options *o, cairn_hook **out) {
  return cairn_hook_new_summary_saver(o, out);
}

cairn_status cairn_progress_hook_new(const cairn_progress_hook_options *o, cairn_hook **out) {
  return cairn_hook_new_progress(o, out);
}
