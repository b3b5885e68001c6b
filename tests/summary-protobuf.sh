#!/bin/sh
# tests/summary-protobuf.sh — an event file written by cairn_event_writer
# (tests/summary_gen) decoded by the real protobuf library with TensorBoard's
# Event / Summary / SessionLog field numbers, framing and masked CRC-32C
# checked by a separate Python implementation (TAP; run by make check).
# Skipped without /usr/bin/python3 and its google.protobuf (Debian:
# python3-protobuf). TensorBoard itself is not needed.

: "${top_builddir:=.}"
GEN="$top_builddir/tests/summary_gen"
PY=/usr/bin/python3

if [ ! -x "$PY" ] || ! "$PY" -c 'import google.protobuf' 2>/dev/null; then
  echo "1..0 # SKIP no /usr/bin/python3 with google.protobuf (python3-protobuf)"
  exit 0
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/summary-pb.XXXXXX") || {
  echo "1..0 # SKIP cannot create a temporary directory"
  exit 0
}
trap 'rm -rf "$T"' EXIT

if ! path=$("$GEN" "$T/logs" 2>"$T/err"); then
  echo "1..1"
  echo "not ok 1 - summary_gen wrote an event file"
  sed 's/^/# /' "$T/err"
  exit 0
fi

"$PY" - "$path" <<'PYEOF'
import os, re, socket, struct, sys
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

n = 0
def check(ok, what):
    global n
    n += 1
    print(("ok %d - %s" if ok else "not ok %d - %s") % (n, what))

def crc32c(data):  # bitwise, reflected 0x82F63B78
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF

def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF

F = descriptor_pb2.FieldDescriptorProto
fd = descriptor_pb2.FileDescriptorProto(name="event.proto", package="tensorflow", syntax="proto3")
def message(name, fields):
    m = fd.message_type.add(name=name)
    for fname, num, typ, tname, label in fields:
        f = m.field.add(name=fname, number=num, type=typ, label=label)
        if tname:
            f.type_name = tname
O, R = F.LABEL_OPTIONAL, F.LABEL_REPEATED
message("Value", [("tag", 1, F.TYPE_STRING, None, O), ("simple_value", 2, F.TYPE_FLOAT, None, O)])
message("Summary", [("value", 1, F.TYPE_MESSAGE, ".tensorflow.Value", R)])
message("SessionLog", [("status", 1, F.TYPE_INT32, None, O), ("checkpoint_path", 2, F.TYPE_STRING, None, O),
                       ("msg", 3, F.TYPE_STRING, None, O)])
message("Event", [("wall_time", 1, F.TYPE_DOUBLE, None, O), ("step", 2, F.TYPE_INT64, None, O),
                  ("file_version", 3, F.TYPE_STRING, None, O),
                  ("summary", 5, F.TYPE_MESSAGE, ".tensorflow.Summary", O),
                  ("session_log", 7, F.TYPE_MESSAGE, ".tensorflow.SessionLog", O)])
pool = descriptor_pool.DescriptorPool()
pool.Add(fd)
desc = pool.FindMessageTypeByName("tensorflow.Event")
try:
    Event = message_factory.GetMessageClass(desc)
except AttributeError:
    Event = message_factory.MessageFactory(pool).GetPrototype(desc)

path = sys.argv[1]
print("1..12")
name = os.path.basename(path)
check(re.fullmatch(r"events\.out\.tfevents\.1700000000\.%s\.\d+" % re.escape(socket.gethostname()), name) is not None,
      "file name events.out.tfevents.<time>.<host>.<pid>: " + name)
data = open(path, "rb").read()
events, bodies, off, framing = [], [], 0, True
while off < len(data):
    if len(data) - off < 16:
        framing = False
        break
    (length,) = struct.unpack_from("<Q", data, off)
    (lcrc,) = struct.unpack_from("<I", data, off + 8)
    body = data[off + 12: off + 12 + length]
    (dcrc,) = struct.unpack_from("<I", data, off + 12 + length)
    if lcrc != masked(data[off: off + 8]) or dcrc != masked(body):
        framing = False
        break
    ev = Event()
    ev.ParseFromString(body)
    events.append(ev)
    bodies.append(body)
    off += 12 + length + 4
check(framing and off == len(data), "TFRecord framing and both masked CRC-32C of every record")
check(len(events) == 10, "10 events (got %d)" % len(events))
e = events[0]
check(e.file_version == "brain.Event:2" and e.step == 0, "first: file_version brain.Event:2")
check(all(x.wall_time == 1700000000.25 for x in events), "wall_time of every event")
e = events[1]
check(e.HasField("session_log") and e.session_log.status == 1 and e.step == 301, "SessionLog START at 301")
loss = [(x.step, x.summary.value[0].tag, x.summary.value[0].simple_value) for x in events[2:7]]
check(loss == [(301 + i, "loss", struct.unpack("<f", struct.pack("<f", 1.0 / (i + 1)))[0]) for i in range(5)],
      "five loss scalars as float32: %r" % (loss,))
check(all(len(x.summary.value) == 1 for x in events[2:9]), "one Summary.Value per scalar event")
e = events[7]
check(e.step == 305 and e.summary.value[0].tag == "train/accuracy" and e.summary.value[0].simple_value == 0.8125,
      "accuracy scalar")
e = events[8]
check(e.step == -9 and e.summary.value[0].simple_value == -7.25, "negative step (10-byte varint)")
e = events[9]
check(e.session_log.status == 3 and e.session_log.checkpoint_path == "/d/model.ckpt-305" and e.step == 305,
      "SessionLog CHECKPOINT with its path")
check(all(x.SerializeToString() == b for x, b in zip(events, bodies)),
      "every event is byte-identical to protobuf's own serialization of it")
PYEOF
