#!/usr/bin/env python3
"""`ddgnn driver` end to end with ASE (Debian's python3-ase) as the i-PI server: two models trained
here from the repository's configs (ethanol from xtb, periodic Cu from LAMMPS's EAM) answer ASE's
SocketIOCalculator with the energy, forces and stress that `ddgnn evaluate` gives on the same
structures, also after atoms move across the periodic boundary; an NVE run through jobs/md.py
conserves energy; and each fault (no server, a socket closed mid-message, another atom count, an
element the model lacks, an unusable cell, an unknown message, SIGTERM) ends the driver with one
clear line and a non-zero exit. Run as: test_driver.py ETHANOL.extxyz CU.extxyz (ctest does) with
DDGNN set to the binary."""

import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import numpy as np
from ase import units
from ase.calculators.socketio import SocketIOCalculator
from ase.io import read, write

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "jobs"))
import md  # noqa: E402  (jobs/md.py: the script the README shows)

DDGNN = os.environ.get("DDGNN", os.path.join(ROOT, "build", "app", "ddgnn"))
md.DDGNN = DDGNN
ETHANOL, CU = None, None
ENV = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE")


def ddgnn(*args, check=True):
    r = subprocess.run([DDGNN, *args], capture_output=True, text=True, cwd=ROOT, env=ENV)
    if check and r.returncode != 0:
        raise AssertionError("ddgnn %s: %d\n%s%s" % (" ".join(args), r.returncode, r.stdout,
                                                      r.stderr))
    return r


def socket_name(tag):
    return "ddgnn_test_%s_%d" % (tag, os.getpid())


def driver(run_dir, structure, name, *extra):
    """The driver on the Unix socket of `name`, or on localhost:`name` when it is a port."""
    where = ["--inet", "localhost:%d" % name] if isinstance(name, int) else ["--unix", name]
    return subprocess.Popen([DDGNN, "driver", "--run", run_dir, "--structure", structure, *where,
                             "--threads", "1", *extra], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=ENV)


def free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def finish(proc, timeout=30):
    out, _ = proc.communicate(timeout=timeout)
    return proc.returncode, out


def train(tmp, config, data, name, *sets):
    h5 = os.path.join(tmp, name + ".h5")
    ddgnn("convert", data, h5)
    run_dir = os.path.join(tmp, name)
    ddgnn("train", "-c", os.path.join(ROOT, "configs", config), "--set", "Dataset.path=" + h5,
          "--set", "Output.run_dir=" + run_dir, "--set", "Runtime.intra_op_threads=1", *sets)
    ddgnn("evaluate", "--run", run_dir, "--threads", "1")
    return run_dir, os.path.join(run_dir, "eval_test", "predictions.extxyz")


class FakeServer:
    """An i-PI server that says what a test wants it to say: `script(conn)` runs on the accepted
    connection, then the connection closes."""

    def __init__(self, name, script):
        self.path = "/tmp/ipi_" + name
        if os.path.exists(self.path):
            os.unlink(self.path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(1)
        self.sock.settimeout(30)
        self.thread = threading.Thread(target=self._serve, args=(script,), daemon=True)
        self.thread.start()

    def _serve(self, script):
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        with conn:
            try:
                script(conn)
            except OSError:
                pass

    def close(self):
        self.thread.join(timeout=30)
        self.sock.close()
        os.unlink(self.path)


def header(text):
    return text.encode("ascii").ljust(12)


def posdata(n_atoms, cell=None):
    cell = np.eye(3) * 20.0 if cell is None else cell
    body = np.asarray(cell, np.float64).T.tobytes() + np.linalg.pinv(cell).tobytes()
    body += struct.pack("i", n_atoms)
    body += (np.arange(3 * n_atoms, dtype=np.float64) * 0.7).tobytes()
    return header("POSDATA") + body


class Driver(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="ddgnn_md_")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.ethanol_run, cls.ethanol_pred = train(
            cls.tmp, "ethanol_schnet.json", ETHANOL, "ethanol", "--set", "Training.num_epoch=30",
            "--set", "Training.time_limit_s=0", "--set", "Dataset.split_block=2")
        cls.cu_run, cls.cu_pred = train(
            cls.tmp, "cu_eam_schnet.json", CU, "cu", "--set", "Training.num_epoch=2", "--set",
            "Training.time_limit_s=300", "--set", "NeuralNetwork.Architecture.hidden_dim=16")

    def compare_with_evaluate(self, run_dir, predictions, tag, move=None, inet=False):
        frames = read(predictions, index=":")
        structure = os.path.join(self.tmp, tag + "_start.extxyz")
        write(structure, frames[0], format="extxyz")
        if inet:
            name = free_port()
            calc = SocketIOCalculator(port=name, timeout=120)
        else:
            name = socket_name(tag)
            calc = SocketIOCalculator(unixsocket=name, timeout=120)
        proc = driver(run_dir, structure, name)
        try:
            for atoms in frames:
                want_e = atoms.info["pred_energy"]
                want_f = atoms.arrays["pred_forces"]
                want_s = atoms.info.get("pred_stress")
                probe = atoms.copy()
                probe.calc = calc
                if move is not None:
                    move(probe)
                e = probe.get_potential_energy()
                f = probe.get_forces()
                self.assertAlmostEqual(e, want_e, delta=2e-6 * abs(want_e) + 1e-4)
                np.testing.assert_allclose(f, want_f, rtol=1e-4, atol=2e-4)
                if want_s is not None:
                    s = probe.get_stress(voigt=False)
                    np.testing.assert_allclose(s.ravel(), np.asarray(want_s).ravel(), rtol=1e-3,
                                               atol=1e-6)
        finally:
            calc.close()
        rc, out = finish(proc)
        self.assertEqual(rc, 0, out)
        self.assertIn("calls", out)
        return frames

    def test_ethanol_energy_and_forces_equal_evaluate(self):
        self.compare_with_evaluate(self.ethanol_run, self.ethanol_pred, "ethanol")

    def test_an_internet_socket_serves_as_well(self):
        self.compare_with_evaluate(self.ethanol_run, self.ethanol_pred, "inet", inet=True)

    def test_periodic_cu_energy_forces_and_stress_equal_evaluate(self):
        frames = read(self.cu_pred, index=":")
        self.assertIn("pred_stress", frames[0].info)
        self.compare_with_evaluate(self.cu_run, self.cu_pred, "cu")

    def test_atoms_moved_across_the_periodic_boundary_change_nothing(self):
        def move(atoms):
            # Half of a lattice vector and more: most atoms leave the cell, unwrapped.
            atoms.positions += 0.6 * atoms.cell[0] + 1.3 * atoms.cell[2]
            atoms.positions[::3] -= atoms.cell[1]
        self.compare_with_evaluate(self.cu_run, self.cu_pred, "cu_moved", move)

    def test_nve_conserves_energy(self):
        # 200 steps of 0.5 fs from a test structure at 300 K. Velocity Verlet's error in the
        # total energy is bounded and oscillates with (omega dt)^2: for the fastest motion of
        # ethanol (C-H and O-H stretches, period ~10 fs, omega*dt ~0.3) about 2% of the kinetic
        # energy, ~0.4 meV/atom here; a drift (a non-conservative force, or forces in other units
        # than the energy) grows without bound. Bounds: the total energy's excursion below
        # 5 meV/atom, its drift below 5 meV/atom/ps.
        atoms = read(self.ethanol_pred, index=0)
        atoms.calc = None
        s = md.run_md(self.ethanol_run, atoms, steps=200, dt_fs=0.5, temperature=300, seed=1)
        self.assertTrue(s["stable"], s)
        self.assertEqual(s["steps"], 200)
        self.assertLess(s["max_excursion_mev_atom"], 5.0, s)
        self.assertLess(abs(s["drift_mev_atom_ps"]), 5.0, s)
        self.assertGreater(s["mean_temperature_k"], 50.0, s)

    # ---- faults: one line and a non-zero exit each ----

    def expect_fault(self, proc, text, rc=None):
        code, out = finish(proc)
        self.assertNotEqual(code, 0, out)
        if rc is not None:
            self.assertEqual(code, rc, out)
        self.assertIn(text, out)
        self.assertNotIn("internal error", out)
        return out

    def ethanol_structure(self):
        path = os.path.join(self.tmp, "ethanol_one.extxyz")
        if not os.path.exists(path):
            atoms = read(self.ethanol_pred, index=0)
            atoms.calc = None
            write(path, atoms, format="extxyz")
        return path

    def test_no_server_is_an_error_after_the_connect_timeout(self):
        start = time.monotonic()
        proc = driver(self.ethanol_run, self.ethanol_structure(), socket_name("none"),
                      "--connect-timeout", "1")
        self.expect_fault(proc, "no i-PI server at /tmp/ipi_" + socket_name("none") + " after 1 s")
        self.assertLess(time.monotonic() - start, 20)

    def run_fake(self, tag, script, structure=None, run_dir=None):
        name = socket_name(tag)
        server = FakeServer(name, script)
        proc = driver(run_dir or self.ethanol_run, structure or self.ethanol_structure(), name)
        return server, proc

    def test_a_socket_closed_mid_message_is_named(self):
        def script(conn):
            conn.sendall(header("POSDATA") + b"\0" * 40)
        server, proc = self.run_fake("cut", script)
        self.expect_fault(proc, "closed the connection in the middle of POSDATA (after 40 of 72")
        server.close()

    def test_another_atom_count_is_refused(self):
        def script(conn):
            conn.sendall(posdata(10))
            conn.recv(12)
        server, proc = self.run_fake("count", script)
        self.expect_fault(proc, "sends positions of 10 atoms; the structure file holds 9")
        server.close()

    def test_an_unknown_message_is_refused(self):
        def script(conn):
            conn.sendall(header("HELLO"))
            conn.recv(12)
        server, proc = self.run_fake("unknown", script)
        self.expect_fault(proc, "sends 'HELLO', a message the i-PI protocol does not know")
        server.close()

    def test_an_unusable_cell_is_refused(self):
        cu = read(self.cu_pred, index=0)
        cu.calc = None
        structure = os.path.join(self.tmp, "cu_one.extxyz")
        write(structure, cu, format="extxyz")

        def script(conn):
            conn.sendall(posdata(len(cu), cell=np.zeros((3, 3))))
            conn.recv(12)
        server, proc = self.run_fake("cell", script, structure, self.cu_run)
        self.expect_fault(proc, "the cell it sends cannot be used")
        server.close()

    def test_an_element_the_model_lacks_is_refused_at_start(self):
        atoms = read(self.ethanol_pred, index=0)
        atoms.calc = None
        atoms.numbers[0] = 7  # N: ethanol holds H, C and O only
        structure = os.path.join(self.tmp, "with_n.extxyz")
        write(structure, atoms, format="extxyz")
        proc = driver(self.ethanol_run, structure, socket_name("element"), "--connect-timeout",
                      "0")
        self.expect_fault(proc, "holds N")

    def test_sigterm_ends_it_cleanly(self):
        def script(conn):
            conn.sendall(header("STATUS"))
            conn.recv(12)
            time.sleep(20)  # a silent server
        server, proc = self.run_fake("term", script)
        time.sleep(2.0)
        proc.send_signal(signal.SIGTERM)
        start = time.monotonic()
        self.expect_fault(proc, "ddgnn driver: stopped by SIGTERM", rc=128 + signal.SIGTERM)
        self.assertLess(time.monotonic() - start, 5)
        server.close()


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: test_driver.py ETHANOL.extxyz CU.extxyz [unittest args]")
    ETHANOL, CU = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    unittest.main(argv=[sys.argv[0]] + sys.argv[3:], verbosity=2)
