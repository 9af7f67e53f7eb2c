"""iclr26.hf.lora: low-rank adapters on any torch model's linear layers."""

import pytest
import torch
from torch import nn

from iclr26.hf import LoRALinear, add_lora, lora_disabled, lora_parameters, merge_lora


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.Embedding(10, 8)
        self.block = nn.ModuleDict({"q_proj": nn.Linear(8, 8), "v_proj": nn.Linear(8, 8, bias=False)})
        self.out = nn.Linear(8, 10)

    def forward(self, x):
        h = self.emb(x)
        return self.out(h + self.block["q_proj"](h) + self.block["v_proj"](h))


def _x():
    return torch.randint(0, 10, (3, 5), generator=torch.Generator().manual_seed(1))


def test_add_lora_wraps_targets_freezes_the_rest_and_starts_as_identity():
    net, x = Net(), _x()
    before = net(x).detach()
    names = add_lora(net, rank=2, alpha=4.0)
    assert names == ["block.q_proj", "block.v_proj"]
    assert isinstance(net.block["q_proj"], LoRALinear) and isinstance(net.out, nn.Linear)
    trainable = [n for n, p in net.named_parameters() if p.requires_grad]
    assert sorted(trainable) == sorted(f"{n}.lora_{k}" for n in names for k in "AB")
    assert torch.equal(net(x), before)  # B = 0
    assert net.block["q_proj"].scaling == 2.0
    assert len(lora_parameters(net)) == 4


def test_training_moves_only_the_adapters_and_merge_keeps_the_function():
    net, x = Net(), _x()
    add_lora(net, targets=["q_proj", "v_proj"], rank=2)
    frozen = {n: p.detach().clone() for n, p in net.named_parameters() if not p.requires_grad}
    opt = torch.optim.SGD(lora_parameters(net), lr=0.5)
    for _ in range(5):
        opt.zero_grad()
        net(x).logsumexp(-1).mean().backward()
        opt.step()
    assert all(torch.equal(p, frozen[n]) for n, p in net.named_parameters() if n in frozen)
    assert net.block["q_proj"].lora_B.abs().sum() > 0
    tuned = net(x).detach()
    with lora_disabled(net):
        base = net(x).detach()
    assert not torch.allclose(base, tuned)
    assert net.block["q_proj"].enabled  # back on after the block
    merged = merge_lora(net)
    assert merged == ["block.q_proj", "block.v_proj"]
    assert isinstance(net.block["q_proj"], nn.Linear) and not any(isinstance(m, LoRALinear) for m in net.modules())
    torch.testing.assert_close(net(x), tuned, atol=1e-5, rtol=1e-5)


def test_lora_linear_matches_the_dense_update():
    base = nn.Linear(6, 4)
    layer = LoRALinear(base, rank=3, alpha=3.0, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        layer.lora_B.normal_()
    x = torch.randn(2, 6)
    torch.testing.assert_close(layer(x), x @ (base.weight + layer.delta_weight()).T + base.bias)
    bound = 1 / 6**0.5
    assert layer.lora_A.abs().max() <= bound  # peft's kaiming_uniform(a=sqrt(5)) range


def test_on_a_transformers_llama(tmp_path):
    pytest.importorskip("transformers")
    from transformers import AutoModelForCausalLM

    from iclr26.hf import write_tiny_model

    model = AutoModelForCausalLM.from_pretrained(write_tiny_model("llama", tmp_path / "llama")).eval()
    ids = torch.tensor([[1, 2, 3, 4]])
    before = model(ids).logits.detach()
    names = add_lora(model, targets=("q_proj", "k_proj", "v_proj", "o_proj"), rank=4)
    assert len(names) == 4 * model.config.num_hidden_layers
    torch.testing.assert_close(model(ids).logits, before)
    assert sum(p.numel() for p in lora_parameters(model)) == sum(
        p.numel() for p in model.parameters() if p.requires_grad
    )


def test_bad_input_is_refused_clearly():
    with pytest.raises(TypeError, match="model"):
        add_lora("net")
    with pytest.raises(ValueError, match="match no"):
        add_lora(Net(), targets="nothing")
    with pytest.raises(ValueError, match="targets"):
        add_lora(Net(), targets=[])
    with pytest.raises(TypeError, match="targets"):
        add_lora(Net(), targets=3)
    with pytest.raises(ValueError, match="rank"):
        add_lora(Net(), rank=0)
    with pytest.raises(ValueError, match="alpha"):
        add_lora(Net(), alpha=0.0)
    net = Net()
    add_lora(net)
    with pytest.raises(ValueError, match="already"):
        add_lora(net)
    for fn in (lora_parameters, merge_lora):
        with pytest.raises(ValueError, match="no LoRA"):
            fn(Net())
    with pytest.raises(ValueError, match="no LoRA"), lora_disabled(Net()):
        pass
    with pytest.raises(TypeError, match="base"):
        LoRALinear(nn.Conv1d(2, 2, 1))
