"""Run work inside a virtual cluster: every task and actor asks for the VC's Ray resource.

    python inside.py team-a        # on a machine that can reach the Ray head (ray.init below)
"""

import sys

import ray

VC = sys.argv[1] if len(sys.argv) > 1 else "team-a"
INSIDE = {f"rayscale.io/vc/{VC}": 0.001}  # 1000 units a node: marks where work may go


@ray.remote(num_cpus=1, resources=INSIDE)
def where() -> str:
    return ray.get_runtime_context().get_node_id()


if __name__ == "__main__":
    ray.init()
    nodes = set(ray.get([where.remote() for _ in range(8)]))
    print(f"8 tasks ran on {len(nodes)} node(s) of virtual cluster {VC}: {sorted(nodes)}")
