"""The block cache's replacement policy (`block_cache_policy`) from Python."""

import random

import pytest

import attune


def test_s3fifo_block_cache_reads_back_every_key(tmp_path):
    seed = random.randrange(2**32)
    print(f"seed {seed}")
    rng = random.Random(seed)
    opts = {"block_cache_policy": "s3fifo", "block_cache_size": "64KiB", "compression": "lz4"}
    with attune.DB(str(tmp_path / "db"), **opts) as db:
        want = {}
        batch = attune.WriteBatch()
        for i in range(3000):
            key = b"key%06d" % i
            # Compressible, so that blocks are stored compressed and read through the cache
            # (uncompressed blocks of a mapped table are used in place).
            want[key] = (b"value-%06d-" % i) * rng.randrange(1, 20)
            batch.put(key, want[key])
        db.write(batch)
        db.compact()
        for key in rng.sample(sorted(want), len(want)):
            assert db.get(key) == want[key], f"seed {seed}"
        stats = db.stats()
        assert stats["options"]["block_cache_policy"] == "s3fifo"
        cache = stats["block_cache"]
        assert cache["usage_bytes"] <= cache["capacity_bytes"]
        assert cache["evictions"] > 0


@pytest.mark.parametrize(
    "opts",
    [
        {"block_cache_policy": "arc"},
        {"block_cache_policy": "s3fifo", "memory_budget": "64MiB"},  # adaptive by default
    ],
)
def test_bad_block_cache_policy_raises_invalid_argument(tmp_path, opts):
    with pytest.raises(attune.InvalidArgumentError, match="block_cache_policy"):
        attune.DB(str(tmp_path / "db"), **opts)
