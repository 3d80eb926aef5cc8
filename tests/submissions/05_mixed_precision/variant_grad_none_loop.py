# solution: amp-train-step
# fails:
# Correct variant: gradients cleared by hand (p.grad = None), autocast with keywords and enabled=True, float(loss).
import torch


def amp_train_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
    for p in model.parameters():
        p.grad = None
    with torch.autocast(device_type=device_type, dtype=dtype, enabled=True):
        prediction = model(x)
        loss = loss_fn(prediction, y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return float(loss)
