"""meta_replica: stand-ins of the real tensors' storage bytes, shared
storage kept shared, the user's model untouched."""
import torch

from peakmem.step.meta_replica import meta_replica


def test_stand_ins_keep_storage_bytes_and_sharing():
    model = torch.nn.Linear(4, 3)
    model.tied = model.weight  # a second name for the same parameter
    base = torch.zeros(10, 6)
    view = base[2:5]  # a view: 18 elements of base's 60-element storage
    replica, (a, b), kwargs = meta_replica(model, (base, view), {"x": torch.ones(2, dtype=torch.int64)})
    assert replica is not model and model.weight.device.type == "cpu"
    assert replica.weight.device.type == "meta" and replica.tied is replica.weight
    assert isinstance(replica.weight, torch.nn.Parameter)
    # base's storage: 10 * 6 float32 = 240 bytes; the view's stand-in points into the same storage.
    assert a.untyped_storage().nbytes() == 240 and b.untyped_storage().nbytes() == 240
    assert b.untyped_storage()._cdata == a.untyped_storage()._cdata
    assert b.storage_offset() == 12 and b.shape == (3, 6)
    assert kwargs["x"].device.type == "meta" and kwargs["x"].dtype == torch.int64


def test_a_meta_model_is_its_own_replica():
    model = torch.nn.Linear(4, 3, device="meta")
    x = torch.empty(2, 4, device="meta")
    replica, inputs, _ = meta_replica(model, (x,), {})
    assert replica is model and inputs[0] is x
