#include "peakmem/semantics/type_promotion.h"

#include <string_view>
#include <vector>

namespace peakmem {
namespace {

enum class Category { kBool, kInt, kFloat, kComplex, kOther };

Category CategoryByName(const DType* d) {
  const std::string_view n = d->short_name;
  if (n == "b8") return Category::kBool;
  if (n == "ui8" || n == "i8" || n == "i16" || n == "i32" || n == "i64") return Category::kInt;
  if (n == "f16" || n == "bf16" || n == "f32" || n == "f64") return Category::kFloat;
  if (n == "c32" || n == "c64" || n == "c128") return Category::kComplex;
  return Category::kOther;  // float8, float4, ui64: no promotion with other types
}

// Every elementwise call asks (the runtime model's scratch estimate): each
// dtype's category is computed once, indexed by its place in AllDTypes().
Category CategoryOf(const DType* d) {
  static const std::vector<Category>* table = [] {
    auto* t = new std::vector<Category>();
    for (const DType& each : AllDTypes()) t->push_back(CategoryByName(&each));
    return t;
  }();
  const DType* first = AllDTypes().data();
  if (d >= first && d < first + table->size()) return (*table)[static_cast<std::size_t>(d - first)];
  return CategoryByName(d);
}

const DType* Named(std::string_view n) { return FindDType(n); }

// The complex type whose parts are `bits` wide.
const DType* ComplexOfBits(int bits) {
  return Named(bits <= 16 ? "c32" : bits <= 32 ? "c64" : "c128");
}

}  // namespace

const DType* PromoteTypes(const DType* a, const DType* b) {
  if (a == nullptr || b == nullptr) return nullptr;
  if (a == b) return a;
  const Category ca = CategoryOf(a), cb = CategoryOf(b);
  if (ca == Category::kOther || cb == Category::kOther) return nullptr;
  if (ca == Category::kBool) return b;
  if (cb == Category::kBool) return a;
  if (ca != cb) {
    const DType* hi = ca > cb ? a : b;
    const DType* lo = ca > cb ? b : a;
    // A complex and a wider float: the complex type of the float's width
    // (float64 with complex64 is complex128).
    if (CategoryOf(hi) == Category::kComplex && CategoryOf(lo) == Category::kFloat) {
      const int parts = hi->bits / 2;
      const int wider = lo->bits > parts ? lo->bits : parts;
      return ComplexOfBits(lo->short_name == "bf16" && parts < 32 ? 32 : wider);
    }
    return hi;
  }
  switch (ca) {
    case Category::kInt: {
      // uint8 with a signed type: the next signed type that holds both.
      const bool ua = a->short_name == "ui8", ub = b->short_name == "ui8";
      if (ua || ub) {
        const DType* s = ua ? b : a;
        return s->bits == 8 ? Named("i16") : s;
      }
      return a->bits >= b->bits ? a : b;
    }
    case Category::kFloat:
      if (a->bits == 16 && b->bits == 16) return Named("f32");  // float16 with bfloat16
      return a->bits >= b->bits ? a : b;
    default:
      return a->bits >= b->bits ? a : b;
  }
}

namespace {

// ATen's combine_categories(higher, lower).
const DType* Combine(const DType* higher, const DType* lower, bool* ok) {
  if (higher == nullptr) return lower;
  if (lower == nullptr) return higher;
  const Category ch = CategoryOf(higher), cl = CategoryOf(lower);
  if (ch == Category::kComplex) return higher;
  if (cl == Category::kComplex) {
    return ch == Category::kFloat ? ComplexOfBits(higher->bits) : lower;
  }
  if (ch == Category::kFloat) return higher;
  if (ch == Category::kBool || cl == Category::kFloat) {
    const DType* p = PromoteTypes(higher, lower);
    if (p == nullptr) *ok = false;
    return p;
  }
  return higher;
}

const DType* Accumulate(const DType* state, const DType* d, bool* ok) {
  if (state == nullptr) return d;
  const DType* p = PromoteTypes(state, d);
  if (p == nullptr) *ok = false;
  return p;
}

}  // namespace

const DType* ResultType(const PromotionOperands& operands) {
  bool ok = true;
  const DType* dim = nullptr;
  const DType* zero = nullptr;
  const DType* wrapped = nullptr;
  for (const ValueType* t : operands.tensors) {
    if (t == nullptr || t->dtype == nullptr) return nullptr;
    if (t->shape.empty()) {
      zero = Accumulate(zero, t->dtype, &ok);
    } else {
      dim = Accumulate(dim, t->dtype, &ok);
    }
  }
  static const DType* const kBool = Named("b8");
  static const DType* const kInt = Named("i64");
  static const DType* const kFloat = Named("f32");  // the default dtype
  static const DType* const kComplex = Named("c64");
  for (NumberKind k : operands.numbers) {
    const DType* d = k == NumberKind::kBool      ? kBool
                     : k == NumberKind::kInt     ? kInt
                     : k == NumberKind::kFloat   ? kFloat
                     : k == NumberKind::kComplex ? kComplex
                                                 : nullptr;
    if (d != nullptr) wrapped = Accumulate(wrapped, d, &ok);
  }
  const DType* result = Combine(dim, Combine(zero, wrapped, &ok), &ok);
  return ok ? result : nullptr;
}

}  // namespace peakmem
