"""Parity cases: FFT and the complex64 values it produces (carried as float32 pairs).

Graph inputs and outputs are real, so every case ends in a real-valued consumer (abs,
real, imag, irfft, a cast) of the complex values inside the graph.
"""

from __future__ import annotations

import mlx.core as mx

from tests.support.harness import FLOATS, Case, rand, randn

F32 = (mx.float32,)
TOL = {"float32": (2e-5, 2e-5)}


def signal(*shape, scale=1.0):
    return lambda rng, dt: (randn(rng, shape, dt, scale),)


CASES = [
    Case("fft.abs_rfft", lambda x: mx.abs(mx.fft.rfft(x)), signal(3, 8), dtypes=FLOATS,
         primitives=("FFT", "Abs", "AsType"), onnx_ops=("DFT",), tolerances=TOL),
    Case("fft.abs_rfft_odd_len", lambda x: mx.abs(mx.fft.rfft(x)), signal(2, 7), primitives=("FFT",), tolerances=TOL),
    Case("fft.irfft_rfft", lambda x: mx.fft.irfft(mx.fft.rfft(x)), signal(3, 6), primitives=("FFT",),
         onnx_ops=("DFT",), tolerances=TOL),
    Case("fft.irfft_rfft_odd_n", lambda x: mx.fft.irfft(mx.fft.rfft(x), n=7), signal(2, 7), primitives=("FFT",),
         tolerances=TOL),
    Case("fft.irfft_len1", lambda x: mx.fft.irfft(mx.fft.rfft(x), n=1), signal(3, 1), primitives=("FFT",)),
    Case("fft.irfft_axis0", lambda x: mx.fft.irfft(mx.fft.rfft(x, axis=0) * 2.5, n=5, axis=0), signal(5, 3),
         primitives=("FFT", "Multiply"), tolerances=TOL),
    Case("fft.real_ifft_fft", lambda x: mx.real(mx.fft.ifft(mx.fft.fft(x))), signal(4, 5), primitives=("FFT", "Real"),
         tolerances=TOL),
    Case("fft.imag_fft_int_input", lambda x: mx.imag(mx.fft.fft(x)), lambda rng, dt: (rand(rng, (2, 6), mx.int32, -9, 9),),
         primitives=("FFT", "Imag", "AsType"), tolerances={"float32": (1e-4, 1e-5)}),
    # the DC and Nyquist bins of a real input are exactly 0: a reciprocal gives MLX's signed infinities
    Case("fft.zero_bins_of_real_input", lambda x: mx.reciprocal(mx.imag(mx.fft.fft(x))), signal(3, 8),
         primitives=("FFT", "Imag"), tolerances={"float32": (1e-3, 1e-3)}),
    Case("fft.fft2_imag", lambda x: mx.imag(mx.fft.fft2(x)), signal(3, 4), primitives=("FFT", "Imag"), tolerances=TOL),
    Case("fft.ifft_axis0_real", lambda x: mx.real(mx.fft.ifft(mx.fft.fft(x, axis=0) * 1j, axis=0)), signal(6, 2),
         primitives=("FFT", "Multiply", "Real"), tolerances=TOL),
    Case("fft.rfftn_abs", lambda x: mx.abs(mx.fft.rfftn(x)), signal(2, 3, 4), primitives=("FFT",), tolerances=TOL),
    Case("fft.irfftn_rfftn", lambda x: mx.fft.irfftn(mx.fft.rfftn(x), s=(2, 3, 5), axes=(0, 1, 2)), signal(2, 3, 5),
         primitives=("FFT",), tolerances=TOL),
    Case("fft.power_spectrum", lambda x: mx.fft.irfft(mx.fft.rfft(x) * mx.conj(mx.fft.rfft(x))), signal(3, 8),
         primitives=("FFT", "Conjugate", "Multiply"), tolerances={"float32": (1e-4, 1e-5)}),
    Case("fft.complex_arith", lambda x, y: mx.real(mx.fft.fft(x) + mx.fft.fft(y)) - mx.imag(-mx.fft.fft(x) - mx.fft.fft(y) * 2j),
         lambda rng, dt: (randn(rng, (2, 5), dt), randn(rng, (2, 5), dt)),
         primitives=("Add", "Subtract", "Negative", "Multiply"), tolerances=TOL),
    Case("fft.complex_square", lambda x: mx.imag(mx.square(mx.fft.fft(x))), signal(2, 5), primitives=("Square",),
         tolerances={"float32": (1e-4, 1e-5)}),
    Case("fft.complex_layout",
         lambda x: mx.abs(mx.concatenate([mx.fft.fft(x)[:, 1:4], mx.fft.fft(x).T[::-1].T[:, :3]], axis=0)).reshape(-1)
         + mx.real(mx.expand_dims(mx.fft.fft(x), 0).squeeze(0).flatten()[:1]),
         signal(3, 5),
         primitives=("Slice", "Transpose", "Concatenate", "Reshape", "ExpandDims", "Squeeze", "Flatten"), tolerances=TOL),
    Case("fft.complex_select", lambda x: mx.imag(mx.where(x > 0, mx.fft.fft(x), 2.0)), signal(3, 4),
         primitives=("Select", "Broadcast"), tolerances=TOL),
    Case("fft.complex_to_bool_and_f16",
         lambda x, y: ((x * (x > 0) + 1j * (y * (y > 0))).astype(mx.bool_), mx.fft.fft(x).astype(mx.float16)),
         lambda rng, dt: (randn(rng, (3, 4), dt), randn(rng, (3, 4), dt)), primitives=("AsType",)),
    Case("fft.unflatten_complex", lambda x: mx.imag(mx.unflatten(mx.fft.fft(x), 1, (2, 3))), signal(2, 6),
         primitives=("Unflatten",), tolerances=TOL),
    # n= padding and truncation (SliceUpdate / Slice on complex values), fftshift (Split)
    Case("fft.irfft_padded_n", lambda x: mx.fft.irfft(mx.fft.rfft(x), n=9), signal(3, 4),
         primitives=("FFT", "SliceUpdate"), tolerances=TOL),
    Case("fft.irfft_truncated_n", lambda x: mx.fft.irfft(mx.fft.rfft(x), n=3), signal(3, 6), primitives=("FFT", "Slice"),
         tolerances=TOL),
    Case("fft.fft_padded_n", lambda x: mx.abs(mx.fft.fft(x, n=8)), signal(3, 5), primitives=("FFT",), tolerances=TOL),
    Case("fft.ifft_padded_n", lambda x: mx.real(mx.fft.ifft(mx.fft.fft(x), n=6)), signal(2, 4),
         primitives=("FFT", "SliceUpdate"), tolerances=TOL),
    Case("fft.rfft_truncated_n", lambda x: mx.abs(mx.fft.rfft(x, n=3)), signal(3, 5), primitives=("FFT",), tolerances=TOL),
    Case("fft.fftshift", lambda x: mx.abs(mx.fft.fftshift(mx.fft.fft2(x))), signal(3, 4), primitives=("FFT", "Split"),
         tolerances=TOL),
    Case("fft.complex_divide", lambda x, y: mx.imag(mx.fft.fft(x) / mx.fft.fft(y)) + mx.real(mx.fft.fft(x) / mx.fft.fft(y)),
         lambda rng, dt: (randn(rng, (2, 5), dt), randn(rng, (2, 5), dt)), primitives=("Divide",),
         tolerances={"float32": (1e-4, 1e-4)}),
    Case("fft.complex_equal", lambda x, y: (x + 1j * y == x + 1j * mx.round(y / 2) * 2, (x + 1j * y) != x),
         lambda rng, dt: (rand(rng, (3, 4), dt, -3, 3), rand(rng, (3, 4), dt, -3, 3)), dtypes=(mx.int32,),
         primitives=("Equal", "NotEqual")),
    Case("fft.complex_sum", lambda x: (mx.real(mx.sum(mx.fft.fft(x), axis=0)), mx.imag(mx.mean(mx.fft.fft(x), axis=1))),
         signal(4, 6), primitives=("Reduce", "Squeeze"), tolerances={"float32": (1e-4, 1e-5)}),
]
