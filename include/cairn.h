/* cairn.h — the whole public API of cairn.
 * Link with: cc prog.c $(pkg-config --cflags --libs cairn) */
#ifndef CAIRN_H
#define CAIRN_H

#include "cairn/build.h"
#include "cairn/status.h"
#include "cairn/runtime.h"
#include "cairn/env.h"
#include "cairn/names.h"
#include "cairn/tensor.h"
#include "cairn/rng.h"
#include "cairn/var.h"
#include "cairn/nn.h"
#include "cairn/optim.h"
#include "cairn/data.h"
#include "cairn/model.h"
#include "cairn/ckpt.h"
#include "cairn/interop.h"
#include "cairn/checkpoint_dir.h"
#include "cairn/saver.h"
#include "cairn/session.h"
#include "cairn/scaffold.h"
#include "cairn/monitored.h"
#include "cairn/summary.h"
#include "cairn/mlp_ops.h"

#endif
