#!/usr/bin/env bash
# Builds the fuzzers' seed corpora from the repository's test data:
#   fuzz/corpus/text/  every *.trace under tests/data (tests/data/corpus/*/ included)
#   fuzz/corpus/json/  every *.json under tests/data that is a peakmem JSON trace
#                      ("format": "peakmem.trace"; the corpus's measured.json and
#                      thunder.json are results, not traces, and are skipped)
# plus a few small hand-written traces (small seeds mutate faster).
# Files are named by their path under tests/data, so rerunning the script
# refreshes them. Usage: fuzz/make_seed_corpus.sh  (from anywhere)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$root/fuzz/corpus"
mkdir -p "$out/text" "$out/json"

name_of() {  # tests/data/corpus/mlp/fw.trace -> corpus_mlp_fw.trace
  local rel="${1#"$root/tests/data/"}"
  echo "${rel//\//_}"
}

n_text=0
n_json=0
while IFS= read -r -d '' f; do
  cp "$f" "$out/text/$(name_of "$f")"
  n_text=$((n_text + 1))
done < <(find "$root/tests/data" -type f -name '*.trace' -print0)
while IFS= read -r -d '' f; do
  if grep -q '"format" *: *"peakmem.trace"' "$f"; then
    cp "$f" "$out/json/$(name_of "$f")"
    n_json=$((n_json + 1))
  fi
done < <(find "$root/tests/data" -type f -name '*.json' -print0)

# Small seeds covering the statement forms.
cat > "$out/text/seed_small.trace" <<'TRACE'
# Constructed by Delete Last Used (took 0 milliseconds)
import torch
@torch.no_grad()
def computation(a, b, *args, c=2, **kw):
  # a: "cpu f32[4, 2]"
  # b: "Collection"
  # c: "int 2"
  C0, C1, = b
  # C0: "cuda:0 bf16[2]"
  # C1 (empty sequence)
  t0 = torch.mul(a, 2.0)  # t0: "cpu f32[4, 2]"
    # t0 = ltorch.mul(a, 2.0)  # t0: "cpu f32[4, 2]"
      # t0 = prims.mul(a, 2.0)  # t0: "cpu f32[4, 2]"
  [t1, t2] = nvFusion0(t0, C0)
    # t1 = prims.neg(t0)  # t1: "cpu f32[4, 2]"
    # t2 = prims.exp(C0)  # t2: "FUTURE cuda:0 bf16[2]"
  (t3, _) = torch.split(t1, [2, 2], dim=0)
  t4 = t3.view(-1)  # t4: "cpu f32[4]"
  del t0, t1
  clear_mutable_collection(b)
  return {'out': t4, 'aux': [t2, None]}
TRACE
cat > "$out/text/seed_continuation.trace" <<'TRACE'
def backward_fn(saved_for_backward, cotangents):
  # saved_for_backward: "Collection"
  # cotangents: "Collection"
  C0, \
  C1, \
  = saved_for_backward
  # C0: "Collection"
  # C1: "Collection"
  t0, = cotangents
  # t0: "cpu f16[3, 5]"
  clear_collection(cotangents)
  t1 = torch.add(t0, t0, alpha=1)  # t1: "cpu f16[3, 5]"
  del t0
  return (t1, None)
TRACE
cat > "$out/json/seed_small.json" <<'JSON'
{"format": "peakmem.trace", "version": 1, "function": "backward_fn",
 "params": [{"kind": "positional",
             "value": {"name": "saved_for_backward", "type": "Collection", "container": "list"}},
            {"kind": "keyword", "value": {"name": "k", "type": "int 3"}, "default": {"const": 3}}],
 "statements": [
{"kind": "unpack", "source": "saved_for_backward", "outputs": [{"name": "C0", "type": "Collection", "container": "list"}]},
{"kind": "unpack", "source": "C0", "outputs": {"list": [{"name": "z", "type": "cpu f32[4]"}, "_"]}},
{"kind": "call", "callee": "torch.mul", "symbol": "mul", "id": "mul", "args": [{"ref": "z"}, {"const": "2.0"}], "kwargs": [["alpha", {"const": 1}]], "outputs": {"name": "t18", "type": "cpu f32[4]"}, "subsymbols": [{"text": "t18 = prims.mul(z, 2.0)", "children": []}]},
{"kind": "call", "callee": "nvFusion0", "id": null, "args": [{"tuple": [{"ref": "t18"}]}, {"dict": [[{"const": "'k'"}, {"ref": "z"}]]}], "outputs": [{"name": "t19", "type": "FUTURE cuda:0 bf16[2, 2]"}]},
{"kind": "del", "names": ["z"]},
{"kind": "clear", "source": "C0", "legacy": false},
{"kind": "assign", "source": "t18", "outputs": {"name": "t20"}},
{"kind": "return", "value": {"tuple": [{"ref": "t20"}, {"set": [{"call": "f", "args": [{"ref": "t19"}]}]}, {"list": []}]}}
]}
JSON
echo "seed corpus: $((n_text + 2)) text files in $out/text, $((n_json + 1)) JSON files in $out/json"
