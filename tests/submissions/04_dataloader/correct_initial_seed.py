# solution: seed-numpy-worker
# fails: 
# says: 
def seed_numpy_worker(worker_id):
    """worker_init_fn: reseed this worker's dataset.rng."""
    # in a worker, torch.initial_seed() is the worker's seed (base seed + worker id)
    get_worker_info().dataset.rng = np.random.default_rng(torch.initial_seed())
