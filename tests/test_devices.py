"""ddpdemo.devices on this CPU-only machine: the loopback interface, the
interface that owns an address, the route toward a host, and the device
a gloo rank's tensors belong on."""
import os
import socket
import subprocess
import sys

import psutil
import pytest
import torch

from ddpdemo import devices


def test_loopback_is_an_interface_of_this_host_owning_127_0_0_1():
    name = devices.loopback_interface()
    assert name in dict(socket.if_nameindex()).values()
    assert devices.interface_of("127.0.0.1") == name


def test_the_route_to_oneself_is_oneself():
    assert devices.address_toward("127.0.0.1") == "127.0.0.1"
    assert devices.gloo_interface("127.0.0.1") == \
        devices.loopback_interface()


def test_an_address_no_interface_owns_is_named_in_the_error():
    owned = {a.address for addrs in psutil.net_if_addrs().values()
             for a in addrs}
    address = next(f"192.0.2.{i}" for i in range(1, 255)
                   if f"192.0.2.{i}" not in owned)     # TEST-NET-1
    with pytest.raises(LookupError, match=address):
        devices.interface_of(address)


def test_outside_an_engine_there_is_no_controller():
    assert devices.controller_address() is None
    # The fallback: one of the addresses this host's name resolves to.
    assert devices.reachable_address() in \
        socket.gethostbyname_ex(socket.gethostname())[2]


def test_without_a_group_the_device_is_the_cpu():
    assert devices.current_device() == torch.device("cpu")


def test_gpu_count_is_what_this_process_may_use():
    """Each GPU counted can be opened, and none is counted where
    CUDA_VISIBLE_DEVICES hides them all (a CPU-only torch: none ever)."""
    count = devices.gpu_count()
    for i in range(count):
        assert torch.cuda.get_device_properties(i).total_memory > 0
    hidden = subprocess.run(
        [sys.executable, "-c",
         "from ddpdemo import devices; print(devices.gpu_count())"],
        env=dict(os.environ, CUDA_VISIBLE_DEVICES=""), capture_output=True,
        text=True, timeout=120)
    assert hidden.stdout.split() == ["0"], hidden.stderr[-1000:]


def test_auto_is_nccl_only_when_every_rank_has_a_gpu_of_its_own():
    """One rule for backend="auto" (the cluster's group, ddpdemo.launch
    and examples/train_ddp.py all ask it)."""
    assert devices.auto_backend([(2, 0), (2, 1)]) == "nccl"
    assert devices.auto_backend([(1, 0), (1, 1)]) == "gloo"  # rank 1: none
    assert devices.auto_backend([(0, 0)]) == "gloo"
    # Ranks on two hosts, each with its own GPUs.
    assert devices.auto_backend([(1, 0), (1, 0)]) == "nccl"
