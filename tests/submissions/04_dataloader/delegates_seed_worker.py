# solution: seed-numpy-worker
# fails: worker-init-fork worker-init-spawn
# says: write it yourself
from helpers.dataloader import seed_worker


def seed_numpy_worker(worker_id):
    """worker_init_fn: reseed this worker's dataset.rng."""
    seed_worker(worker_id)
