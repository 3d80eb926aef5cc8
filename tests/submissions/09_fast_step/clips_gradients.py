# solution: fast-step
# fails: fast-step-results
# says: clip_grad_norm_
# Typical mistake: gradient clipping added out of habit: slow_step does not clip, and these gradients' norm is 2-6.
def fast_step(model, batches, lr=1e-2):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)
    losses = []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(x.device.type, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses).tolist()
