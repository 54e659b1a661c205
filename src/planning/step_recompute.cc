#include "peakmem/planning/step_recompute.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <unordered_set>

#include "peakmem/analyze.h"
#include "peakmem/models/training_step.h"
#include "peakmem/planning/planned_trace.h"
#include "peakmem/semantics/op_registry.h"

namespace peakmem {
namespace {

std::string NameOf(const Trace& trace, ValueId v) { return std::string(trace.value(v).name); }

// The trace's lines are what a rewrite copies: it must be printed text.
void RequirePrinted(const ParsedTrace& parsed, const char* which) {
  if (!parsed.source_is_printed_trace || parsed.source == nullptr) {
    throw StepFileError(parsed.trace.source_name + ": the " + which +
                        " trace was not a printed trace (str(trace)); recomputation rewrites a printed "
                        "trace's own lines");
  }
}

bool IsBlank(std::string_view line) { return line.find_first_not_of(" \t\r") == std::string_view::npos; }

// The first line past statement `index`'s block: the next statement's line.
int BlockEnd(const ParsedTrace& parsed, std::size_t index) {
  const auto& statements = parsed.trace.statements;
  return index + 1 < statements.size() ? statements[index + 1].source_line : parsed.source->line_count() + 1;
}

// Thunder's printing of a tuple of names: `()`, `(a,)`, `(a, b)`.
std::string TupleText(const std::vector<std::string>& names) {
  return fmt::format("({}{})", fmt::join(names, ", "), names.size() == 1 ? "," : "");
}

// The forward returning `kept` as its saved tensors, without its `del`s.
std::string ForwardWithoutFrees(const ParsedTrace& fw, const std::vector<std::string>& kept) {
  const Trace& trace = fw.trace;
  const SourceFile& src = *fw.source;
  const Statement* ret = trace.statements.size() > 0 ? &trace.statements[trace.statements.size() - 1] : nullptr;
  const Expr* saved = nullptr;
  if (ret != nullptr && ret->kind == StatementKind::kReturn) {
    const Expr& r = *ret->returned;
    if (r.kind == Expr::Kind::kTuple && r.items.size() == 2 && r.items[1].kind == Expr::Kind::kTuple &&
        r.items[1].items.size() == 2 && r.items[1].items[0].kind == Expr::Kind::kTuple) {
      saved = &r.items[1].items[0];
    }
  }
  if (saved == nullptr) {
    throw StepFileError(trace.source_name + ": the forward does not end with `return (data, (saved, other))` "
                        "as Thunder's forward traces do");
  }
  std::vector<std::string> old_names;
  for (const Expr& e : saved->items) {
    if (e.kind != Expr::Kind::kValue) throw StepFileError(trace.source_name + ": a saved tensor is not a name");
    old_names.push_back(NameOf(trace, e.value));
  }
  // The saved tuple is the one followed by the saved others, last on the line.
  std::string line(src.Line(ret->source_line));
  const std::string old_text = "(" + TupleText(old_names) + ", ";
  const std::size_t at = line.rfind(old_text);
  if (at == std::string::npos) {
    throw StepFileError(trace.source_name + ": cannot find the saved tuple " + TupleText(old_names) +
                        " in the forward's return");
  }
  line.replace(at + 1, old_text.size() - 3, TupleText(kept));
  std::vector<bool> drop(src.line_count() + 2, false);
  for (const Statement& s : trace.statements) {
    if (s.kind == StatementKind::kDel) drop[s.source_line] = true;
  }
  std::string text;
  for (int l = 1; l <= src.line_count(); ++l) {
    if (drop[l]) continue;
    text += l == ret->source_line ? std::string_view(line) : src.Line(l);
    text += '\n';
  }
  return text;
}

// The backward's `... = C0` unpack: the unpack of the first collection its
// first parameter (saved_for_backward) unpacks into.
std::size_t SavedUnpack(const Trace& bw) {
  ValueId c0 = kNoValue;
  const ValueId saved_for_backward = bw.params.empty() ? kNoValue : bw.params[0].value;
  for (std::size_t i = 0; i < bw.statements.size(); ++i) {
    const Statement& s = bw.statements[i];
    if (s.kind != StatementKind::kUnpack) continue;
    if (c0 == kNoValue && s.source == saved_for_backward) {
      const std::vector<ValueId> outs = FlatOutputs(s);
      if (!outs.empty()) c0 = outs[0];
    } else if (c0 != kNoValue && s.source == c0) {
      return i;
    }
  }
  throw StepFileError(bw.source_name + ": the backward does not unpack its saved tensors (`... = C0`) as "
                      "Thunder's backward traces do");
}

// The C0 unpack's lines for `kept`: each type comment the backward printed,
// or the forward's type for a tensor newly saved.
std::string SavedUnpackText(const ParsedTrace& bw, std::size_t index, const Trace& fw,
                            const std::vector<std::string>& kept) {
  const Trace& trace = bw.trace;
  const Statement& s = trace.statements[index];
  const std::string_view first = bw.source->Line(s.source_line);
  const std::string indent(first.substr(0, first.find_first_not_of(' ')));
  std::unordered_map<std::string, std::string> printed;  // name -> its type comment line
  std::string rest;  // the block's other lines
  int l = s.source_line;
  while (l < BlockEnd(bw, index) && bw.source->Line(l).ends_with('\\')) ++l;  // the unpack's own lines
  for (++l; l < BlockEnd(bw, index); ++l) {
    const std::string_view line = bw.source->Line(l);
    const std::size_t hash = line.find_first_not_of(' ');
    const std::size_t colon = line.find(':');
    if (hash != std::string_view::npos && line[hash] == '#' && colon != std::string_view::npos && colon > hash + 2) {
      printed.emplace(std::string(line.substr(hash + 2, colon - hash - 2)), std::string(line));
    } else {
      rest += std::string(line) + "\n";
    }
  }
  std::unordered_map<std::string_view, ValueId> fw_values;
  for (ValueId v = 0; v < fw.values.size(); ++v) fw_values.emplace(fw.value(v).name, v);
  const std::string c0 = NameOf(trace, s.source);
  std::string text;
  if (kept.empty()) {
    text = fmt::format("{}# {} (empty sequence)\n", indent, c0);
  } else {  // Thunder's unpack_sequence_printer: parts joined into lines of about 80 characters
    std::vector<std::string> parts;
    for (const std::string& name : kept) parts.push_back(name + ", ");
    parts.push_back("= " + c0);
    std::string line;
    for (const std::string& part : parts) {
      if (!line.empty() && line.size() + part.size() > 80) {
        text += indent + line + "\\\n";
        line.clear();
      }
      line += part;
    }
    text += indent + line + "\n";
  }
  for (const std::string& name : kept) {
    auto p = printed.find(name);
    if (p != printed.end()) {
      text += p->second + "\n";
    } else if (auto v = fw_values.find(name); v != fw_values.end()) {
      text += fmt::format("{}# {}: \"{}\"\n", indent, name, fw.value(v->second).type->text);
    }
  }
  return text + rest;
}

// The backward taking `kept` and running the forward's `recompute`
// statements (in forward order), without its `del`s and clears.
std::string BackwardWithoutFrees(const ParsedTrace& bw, const ParsedTrace& fw, const std::vector<std::string>& kept,
                                 const std::vector<std::size_t>& recompute) {
  const Trace& trace = bw.trace;
  const std::size_t unpack = SavedUnpack(trace);
  struct Item {
    bool forward;
    std::size_t index;
  };
  std::vector<Item> items;
  for (std::size_t i = 0; i < trace.statements.size(); ++i) items.push_back({false, i});
  auto reads = [&](const Item& item, std::string_view name) {
    const Trace& t = item.forward ? fw.trace : trace;
    const Statement& s = t.statements[item.index];
    if (!item.forward && (s.kind == StatementKind::kDel || s.kind == StatementKind::kClear ||
                          s.kind == StatementKind::kUnpack)) {
      return false;  // the prologue and the frees (recompute._placed's body leaves them out)
    }
    for (ValueId v : FlatArgs(s)) {
      if (t.value(v).name == name) return true;
    }
    return false;
  };
  // recompute._placed: the last in forward order first, each before the
  // first statement that reads one of its values.
  for (auto r = recompute.rbegin(); r != recompute.rend(); ++r) {
    const std::vector<ValueId> outs = FlatOutputs(fw.trace.statements[*r]);
    auto at = std::find_if(items.begin(), items.end(), [&](const Item& item) {
      return std::any_of(outs.begin(), outs.end(), [&](ValueId v) { return reads(item, fw.trace.value(v).name); });
    });
    items.insert(at, Item{true, *r});
  }
  const SourceFile& src = *bw.source;
  std::string text;
  auto copy = [&](const SourceFile& from, int begin, int end) {
    for (int l = begin; l < end && l <= from.line_count(); ++l) {
      text += from.Line(l);
      text += '\n';
    }
  };
  copy(src, 1, trace.statements.size() > 0 ? trace.statements[0].source_line : src.line_count() + 1);
  for (const Item& item : items) {
    if (item.forward) {  // the statement's own lines: up to a blank line or the next statement
      const int first = fw.trace.statements[item.index].source_line;
      int end = first + 1;
      while (end < BlockEnd(fw, item.index) && !IsBlank(fw.source->Line(end))) ++end;
      copy(*fw.source, first, end);
      continue;
    }
    const Statement& s = trace.statements[item.index];
    if (item.index == unpack) {
      text += SavedUnpackText(bw, unpack, fw.trace, kept);
    } else if (s.kind == StatementKind::kDel || s.kind == StatementKind::kClear) {
      copy(src, s.source_line + 1, BlockEnd(bw, item.index));
    } else {
      copy(src, s.source_line, BlockEnd(bw, item.index));
    }
  }
  return text;
}

// A trace read back from a rewrite's text, as the step file's were read.
ParsedTrace ReadBack(const ParsedTrace& like, std::string text) {
  TextReadOptions options;
  options.rank = like.rank;
  options.world_size = like.world_size;
  return ParseTrace(like.trace.source_name, std::move(text), options);
}

}  // namespace

namespace {

// The forward's statements as candidates see them: each value's producer,
// each statement's recompute cost, tensor inputs and outputs.
class ForwardStatements {
 public:
  explicit ForwardStatements(const Trace& fw) : fw_(fw) {
    std::vector<ValueId> outs, args;
    for (std::size_t i = 0; i < fw.statements.size(); ++i) {
      const Statement& s = fw.statements[i];
      FlatOutputs(s, &outs);
      for (ValueId v : outs) producer_.emplace(fw.value(v).name, i);
    }
  }

  std::optional<std::size_t> Producer(std::string_view name) const {
    auto p = producer_.find(name);
    return p == producer_.end() ? std::nullopt : std::optional<std::size_t>(p->second);
  }

  // Statement i's cost; kNotRecomputed unless it is a call of a known op
  // reading tensors only.
  RecomputeCost Cost(std::size_t i) const {
    const Statement& s = fw_.statements[i];
    if (s.kind != StatementKind::kCall) return RecomputeCost::kNotRecomputed;
    const OpInfo* op = FindCallOp(fw_.CalleeOf(s), fw_.SymbolOf(s));
    if (op == nullptr) return RecomputeCost::kNotRecomputed;
    for (ValueId v : FlatArgs(s)) {
      if (!IsTensorKind(fw_.value(v).type->kind)) return RecomputeCost::kNotRecomputed;
    }
    return RecomputeCostOf(*op);
  }

  RecomputeStep Step(std::size_t i) const {
    RecomputeStep step{i, {}, {}};
    for (ValueId v : FlatArgs(fw_.statements[i])) step.inputs.push_back(NameOf(fw_, v));
    for (ValueId v : FlatOutputs(fw_.statements[i])) step.outputs.push_back(NameOf(fw_, v));
    return step;
  }

  std::int64_t Flops(std::size_t i) const {
    const Statement& s = fw_.statements[i];
    const std::vector<ValueId> args = FlatArgs(s), outs = FlatOutputs(s);
    std::int64_t elements = 0;
    for (ValueId v : outs) elements += static_cast<std::int64_t>(fw_.value(v).type->numel);
    const std::int64_t k =
        args.empty() || fw_.value(args[0]).type->shape.empty() ? 1 : fw_.value(args[0]).type->shape.back();
    return RecomputeFlops(Cost(i), elements, k);
  }

  // The value whose storage `name` is: followed back through views and
  // shallow_copy to the first value something else made.
  std::string Root(std::string name) const {
    for (;;) {
      const auto p = Producer(name);
      if (!p) return name;
      const RecomputeCost cost = Cost(*p);
      const std::vector<ValueId> args = FlatArgs(fw_.statements[*p]);
      if ((cost != RecomputeCost::kView && cost != RecomputeCost::kAlias) || args.empty()) return name;
      name = NameOf(fw_, args[0]);
    }
  }

 private:
  const Trace& fw_;
  std::unordered_map<std::string_view, std::size_t> producer_;
};

bool IsCheap(RecomputeCost cost) { return cost == RecomputeCost::kView || cost == RecomputeCost::kPerElement; }

// The region of `dropped` (recompute_search.h's expensive candidate): the
// statements that make them and, back to what the backward has, their
// inputs; none when a statement is not recomputable.
std::optional<std::vector<std::size_t>> RegionStatements(const ForwardStatements& fs,
                                                         const std::vector<std::string>& dropped,
                                                         const std::unordered_set<std::string>& has) {
  std::vector<std::size_t> stack, out;
  std::unordered_set<std::size_t> seen;
  for (const std::string& d : dropped) stack.push_back(*fs.Producer(d));
  while (!stack.empty()) {
    const std::size_t i = stack.back();
    stack.pop_back();
    if (!seen.insert(i).second) continue;
    if (fs.Cost(i) == RecomputeCost::kNotRecomputed) return std::nullopt;
    out.push_back(i);
    for (const std::string& input : fs.Step(i).inputs) {
      const auto p = fs.Producer(input);
      if (p && has.count(input) == 0) stack.push_back(*p);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<RecomputeCandidate> RecomputeCandidates(const StepFile& step) {
  const Trace& fw = step.forward.trace;
  const ForwardStatements fs(fw);
  std::unordered_set<std::string> excluded(step.spec.outputs.begin(), step.spec.outputs.end());
  excluded.insert(step.spec.flat_args.begin(), step.spec.flat_args.end());
  std::vector<std::string> droppable;  // saved, made by the forward, not an output or flat argument
  for (const std::string& name : step.spec.saved) {
    if (excluded.count(name) == 0 && fs.Producer(name)) droppable.push_back(name);
  }
  std::vector<RecomputeCandidate> pool;
  for (const std::string& name : droppable) {
    const std::size_t i = *fs.Producer(name);
    if (!IsCheap(fs.Cost(i)) || fs.Step(i).outputs.size() != 1) continue;
    pool.push_back({name, fs.Flops(i), false, {name}, {fs.Step(i)}});
  }
  const std::size_t cheap = pool.size();
  std::set<std::vector<std::size_t>> listed;  // regions by their statements
  for (std::size_t c = 0; c < cheap; ++c) listed.insert({pool[c].steps[0].statement});
  for (const std::string& name : droppable) {
    const std::string root = fs.Root(name);
    if (excluded.count(root) > 0 || !fs.Producer(root)) continue;
    std::vector<std::string> dropped;
    for (const std::string& other : droppable) {
      if (fs.Root(other) == root) dropped.push_back(other);
    }
    if (dropped[0] != name) continue;  // listed under the first of its storage's saved tensors
    std::unordered_set<std::string> has(step.spec.saved.begin(), step.spec.saved.end());
    for (const std::string& d : dropped) has.erase(d);
    has.insert(excluded.begin(), excluded.end());
    const auto statements = RegionStatements(fs, dropped, has);
    if (!statements || !listed.insert(*statements).second) continue;
    RecomputeCandidate c{name + "+", 0, true, dropped, {}};
    for (std::size_t i : *statements) {
      c.steps.push_back(fs.Step(i));
      c.flops += fs.Flops(i);
    }
    pool.push_back(std::move(c));
  }
  return pool;
}

RecomputeClosure CloseRecomputation(const std::vector<std::string>& saved, const std::vector<RecomputeCandidate>& pool,
                                    const std::vector<std::size_t>& chosen) {
  std::unordered_set<std::string> dropped;
  std::map<std::size_t, const RecomputeStep*> steps;  // the chosen statements in forward order, each once
  for (std::size_t c : chosen) {
    dropped.insert(pool[c].dropped.begin(), pool[c].dropped.end());
    for (const RecomputeStep& s : pool[c].steps) steps.emplace(s.statement, &s);
  }
  RecomputeClosure out;
  for (const std::string& n : saved) {
    if (dropped.count(n) == 0) out.saved.push_back(n);
  }
  std::unordered_set<std::string> available(out.saved.begin(), out.saved.end());
  for (const auto& [statement, s] : steps) {
    for (const std::string& n : s->inputs) {
      if (available.insert(n).second) out.saved.push_back(n);  // an input the backward lacks: saved instead
    }
    available.insert(s->outputs.begin(), s->outputs.end());
    out.statements.push_back(statement);
  }
  return out;
}

RecomputedTraces RewriteForRecomputation(const StepFile& step, const std::vector<RecomputeCandidate>& pool,
                                         const std::vector<std::size_t>& chosen) {
  RequirePrinted(step.forward, "forward");
  RequirePrinted(step.backward, "backward");
  RecomputeClosure closure = CloseRecomputation(step.spec.saved, pool, chosen);
  RecomputedTraces out;
  out.forward = PrintWithLastUseFrees(ReadBack(step.forward, ForwardWithoutFrees(step.forward, closure.saved)), false);
  out.backward = PrintWithLastUseFrees(
      ReadBack(step.backward, BackwardWithoutFrees(step.backward, step.forward, closure.saved, closure.statements)),
      true);
  out.saved = std::move(closure.saved);
  return out;
}

StepRecomputation PlanStepRecomputation(const StepFile& step, const RecomputeSearchOptions& options) {
  RequirePrinted(step.forward, "forward");
  RequirePrinted(step.backward, "backward");
  StepRecomputation out;
  out.pool = RecomputeCandidates(step);
  std::vector<std::int64_t> flops;
  std::vector<bool> expensive;
  for (const RecomputeCandidate& c : out.pool) {
    flops.push_back(c.flops);
    expensive.push_back(c.expensive);
  }
  // As peakmem.recompute's search simulates: without the module breakdown,
  // which the peak does not depend on.
  TrainingStepSpec lean = step.spec;
  lean.value_modules.clear();
  lean.optimizer_modules.clear();
  lean.held.clear();
  const ParsedTrace* first = step.optimizer_first ? &*step.optimizer_first : nullptr;
  const ParsedTrace* later = step.optimizer_later ? &*step.optimizer_later : nullptr;
  auto simulate = [&](const std::vector<std::size_t>& chosen) {
    if (chosen.empty()) return SimulateTrainingStep(step.forward, step.backward, first, later, lean).peak_bytes;
    RecomputedTraces traces = RewriteForRecomputation(step, out.pool, chosen);
    TrainingStepSpec spec = lean;
    spec.saved = std::move(traces.saved);
    const ParsedTrace fw = ReadBack(step.forward, std::move(traces.forward));
    const ParsedTrace bw = ReadBack(step.backward, std::move(traces.backward));
    return SimulateTrainingStep(fw, bw, first, later, spec).peak_bytes;
  };
  out.search = SearchRecomputation(flops, simulate, options, {}, expensive);
  std::vector<std::size_t> in_order(out.search.chosen);
  std::sort(in_order.begin(), in_order.end());
  for (std::size_t c : in_order) out.names.push_back(out.pool[c].name);
  if (out.search.chosen.empty()) {
    out.traces = {std::string(step.forward.source->text()), std::string(step.backward.source->text()), step.spec.saved};
  } else {
    out.traces = RewriteForRecomputation(step, out.pool, out.search.chosen);
  }
  return out;
}

std::string WriteRecomputedStep(const std::string& name, const std::string& step_json, const RecomputedTraces& traces) {
  nlohmann::ordered_json root;
  try {
    root = nlohmann::ordered_json::parse(step_json);
  } catch (const nlohmann::ordered_json::parse_error& e) {
    throw StepFileError(name + ": not JSON: " + e.what());
  }
  root["forward"]["trace"] = traces.forward;
  root["forward"]["saved"] = traces.saved;
  root["backward"]["trace"] = traces.backward;
  return root.dump(1) + "\n";
}

}  // namespace peakmem
