// A trace the planning tests share: two independent chains, each an exp of
// the argument (f32[256]: 1024 bytes) then its sum (f32[]: 4 bytes),
// written breadth first. Nodes: 0 a, 1 b, 2 c, 3 d, 4 the return.
#pragma once

namespace peakmem::testing_util {

inline constexpr const char* kTwoChainsTrace = R"(import torch
@torch.no_grad()
def fn(x):
  # x: "cpu f32[256]"
  a = torch.exp(x)  # a: "cpu f32[256]"
  b = torch.exp(x)  # b: "cpu f32[256]"
  c = torch.sum(a)  # c: "cpu f32[]"
  del a
  d = torch.sum(b)  # d: "cpu f32[]"
  del b
  return (c, d)
)";

}  // namespace peakmem::testing_util
