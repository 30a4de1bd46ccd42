"""ddpdemo.devices on this CPU-only machine: the loopback interface, the
interface that owns an address, the route toward a host, and the device
a gloo rank's tensors belong on."""
import socket

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
    assert devices.reachable_address() == \
        socket.gethostbyname(socket.gethostname())


def test_without_a_group_or_a_gpu_the_device_is_the_cpu():
    assert devices.current_device() == torch.device("cpu")
    assert devices.gpu_count() == (torch.cuda.device_count()
                                   if torch.cuda.is_available() else 0)
