# solution: amp-clip-step
# fails:
# Correct variant: clip the first parameter group's parameters, zero_grad at the end, loss outside autocast.
import torch
from torch.nn.utils import clip_grad_norm_


def amp_clip_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype, max_norm):
    with torch.autocast(device_type, dtype=dtype):
        out = model(x)
    loss = loss_fn(out, y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    clip_grad_norm_(optimizer.param_groups[0]["params"], max_norm)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach().item()
