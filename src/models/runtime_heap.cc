// The runtime model's heap: objects, storages and reference counts (see
// runtime_interpreter.h).
#include <stdexcept>
#include <string>

#include "runtime_interpreter.h"

namespace peakmem {
namespace runtime_detail {

ObjectId RuntimeModel::NewObject(Object::Kind kind) {
  Object o;
  o.kind = kind;
  objects_.push_back(std::move(o));
  return static_cast<ObjectId>(objects_.size() - 1);
}

StorageId RuntimeModel::NewStorage(std::int64_t bytes, ValueId named, Role role) {
  const std::uint8_t device = named == kNoValue ? 0 : stream_.Device(ValueOf(named).type->device);
  const StorageId id = stream_.Alloc(bytes, named, role, device);
  if (id == kNoStorage) FailOverflow();
  storage_users_.push_back(0);
  return id;
}

ObjectId RuntimeModel::NewTensor(ValueId value, StorageId storage, Dims strides,
                                 bool layout_known, int contiguous) {
  const ObjectId id = NewObject(Object::Kind::kTensor);
  Object& o = objects_[id];
  o.storage = storage;
  o.type = ValueOf(value).type;
  const Dims& shape = o.type->shape;
  if (strides.size() != shape.size()) {
    // The op's layout rule gave strides of another rank than the output's
    // printed shape (a malformed trace: `t` of a 0-d tensor typed [14]):
    // the layout cannot be followed, so it is taken as contiguous.
    if (current_step_ >= 0) {
      const Statement& s = trace_.statements[current_step_];
      Diagnose("line " + std::to_string(s.source_line) + ": '" + std::string(trace_.SymbolOf(s)) +
               "' output '" + std::string(ValueOf(value).name) + "' has " +
               std::to_string(shape.size()) + " dimensions, but the op's layout gives " +
               std::to_string(strides.size()) + "; assumed contiguous");
    }
    strides = ContiguousStrides(shape);
    layout_known = false;
    contiguous = 1;
  }
  o.contiguous = contiguous >= 0 ? contiguous != 0 : IsContiguous(shape, strides);
  if (!o.contiguous || strides.size() != o.type->contiguous_strides.size() ||
      strides != o.type->contiguous_strides) {
    o.strides = static_cast<std::uint32_t>(strides_.size());
    strides_.push_back(std::move(strides));
  }
  o.layout_known = layout_known;
  ++storage_users_[storage];
  return id;
}

ObjectId RuntimeModel::NewArgumentTensor(ValueId value, Role role, const ArgumentTensor& spec) {
  const Value& v = ValueOf(value);
  Dims strides = spec.strides.empty() ? ContiguousStrides(v.type->shape)
                                      : Dims(spec.strides.begin(), spec.strides.end());
  if (strides.size() != v.type->shape.size()) {
    Fail(v.defined_at, "argument '" + std::string(v.name) + "' is given " +
                           std::to_string(strides.size()) + " strides for a " +
                           std::to_string(v.type->shape.size()) + "-d tensor");
  }
  const std::int64_t bytes = spec.external             ? 0
                             : spec.storage_bytes >= 0 ? spec.storage_bytes
                                                       : DenseBytes(value);
  StorageId storage = kNone;
  if (spec.storage_group >= 0) {
    const auto group = static_cast<std::size_t>(spec.storage_group);
    if (group >= group_storage_.size()) group_storage_.resize(group + 1, kNone);
    if (group_storage_[group] == kNone) group_storage_[group] = NewStorage(bytes, value, role);
    storage = group_storage_[group];
  } else {
    storage = NewStorage(bytes, value, role);
  }
  const ObjectId id = NewTensor(value, storage, std::move(strides), true);
  if (spec.external) IncRef(id);  // the holder outside the trace: never released here
  return id;
}

ObjectId RuntimeModel::NewAllocatedTensor(ValueId value, Dims strides, Role role,
                                          bool layout_known) {
  const Value& v = ValueOf(value);
  // A dense tensor occupies numel * itemsize; a strided one (nvFuser's
  // broadcast outputs) only the span its strides reach.
  std::int64_t bytes = DenseBytes(value);
  const bool contiguous = IsContiguous(v.type->shape, strides);
  if (!contiguous && !IsNonOverlappingAndDense(v.type->shape, strides)) {
    bytes = static_cast<std::int64_t>(StorageSpan(v.type->shape, strides) * v.type->dtype->bits / 8);
  }
  const StorageId storage = NewStorage(bytes, value, role);
  return NewTensor(value, storage, std::move(strides), layout_known, contiguous);
}

void RuntimeModel::DecRef(ObjectId id) {
  Object& o = objects_[id];
  if (o.refs <= 0) throw std::logic_error("peakmem runtime model: object freed twice");
  if (--o.refs > 0) return;
  if (o.kind == Object::Kind::kTensor) {
    if (--storage_users_[o.storage] == 0) {
      if (stream_.storages()[o.storage].freed_at != kNeverFreed) {
        throw std::logic_error("peakmem runtime model: storage freed twice");
      }
      stream_.Free(o.storage);
      if (stream_.counter().live() < 0) {
        throw std::logic_error("peakmem runtime model: live bytes became negative");
      }
    }
    return;
  }
  if (o.elements == kNone) return;
  std::vector<ObjectId> elements = std::move(elements_[o.elements]);
  elements_[o.elements].clear();
  for (ObjectId e : elements) DecRef(e);
}

void RuntimeModel::Bind(ValueId value, ObjectId object) {
  if (bound_[value]) Unbind(value);
  object_of_[value] = object;
  bound_[value] = true;
  IncRef(object);
}

void RuntimeModel::Unbind(ValueId value) {
  if (!bound_[value]) return;
  bound_[value] = false;
  DecRef(object_of_[value]);
}

[[noreturn]] void RuntimeModel::FailOverflow() const {
  const SourceLocation at = current_step_ >= 0 ? trace_.statements[current_step_].at
                                               : SourceLocation{1, 1};
  Fail(at, "total tensor bytes overflow 64 bits");
}

void RuntimeModel::Scratch(std::int64_t bytes) {
  const StorageId id = stream_.Alloc(bytes, kNoValue, Role::kScratch);
  if (id == kNoStorage) FailOverflow();
  storage_users_.push_back(0);  // (its row, so that StorageIds index storage_users_)
  stream_.Free(id);
}

}  // namespace runtime_detail
}  // namespace peakmem
