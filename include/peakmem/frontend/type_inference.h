// Output types that a front end's input leaves out, inferred the same way for
// every front end (printed text, JSON export).
//
// Ops that return their inputs print no types for their outputs
// (`(t74,) = update_aliases((t73,))`): each output has its input's type. Which
// ops those are, and which argument they return, is the op registry's
// OpEffect::kReturnsInput and OpInfo::returned_arg (op_registry.h).
//
// Thunder's fallback gradients (`half_vjp(((x,), {}), t40)`, any symbol
// ending in `_vjp`) print none either: their outputs are the gradients of the
// forward inputs listed in the first argument, one per tensor input, each
// with that input's type.
//
// Only outputs whose type is kUnknown are set; a type the input states is
// never replaced. When the count of sources and outputs differ, nothing is
// set (the outputs stay kUnknown, and a model that needs their size reports
// an error at them).
#pragma once

#include "absl/functional/function_ref.h"
#include "peakmem/ir/trace.h"

namespace peakmem {

// Infers the types of call `s`'s untyped outputs from its inputs. Returns
// false, changing nothing, if it would read the type of a value for which
// `pending` is true (a chunk of a text read in parallel does not know the
// types of values bound before it yet); true otherwise, whether or not any
// type was set.
bool InferAliasTypes(Trace* trace, const Statement& s, absl::FunctionRef<bool(ValueId)> pending);
// The same when every earlier value's type is known.
bool InferAliasTypes(Trace* trace, const Statement& s);

// The pass over a whole trace: every call statement in order (so that an
// alias of an alias takes the type inferred for the first), for front ends
// that read all of a trace before inferring.
void InferAliasTypes(Trace* trace);

}  // namespace peakmem
