# solution: fast-step
# fails: fast-step-no-syncs
# says: synchronize inside its loop
# Typical mistake: a synchronize under another name, called in every step (a no-op where there is no GPU, a
# full wait for the queue on one).
def fast_step(model, batches, lr=1e-2):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)
    wait = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    losses = []
    for i, (x, y) in enumerate(batches):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        wait()
        losses.append(loss.detach())
    return torch.stack(losses).tolist()
