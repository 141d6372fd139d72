extern "C" __global__ void __launch_bounds__(256) qrnn_kernel(float* __restrict__ W0_ptr, float* __restrict__ W1_ptr, float* __restrict__ x_ptr, float* __restrict__ z_ptr, int B, int C, int H, int T, int cse_v19, int cse_v2, int cse_v42);
extern "C" __global__ void __launch_bounds__(256) qrnn_kernel_1(float* __restrict__ W0_ptr, float* __restrict__ W1_ptr, float* __restrict__ o_ptr, float* __restrict__ x_ptr, int B, int C, int H, int T, int cse_v19, int cse_v2, int cse_v3, int cse_v42);
extern "C" __global__ void __launch_bounds__(256) qrnn_kernel_2(float* __restrict__ W0_ptr, float* __restrict__ W1_ptr, float* __restrict__ f_ptr, float* __restrict__ x_ptr, int B, int C, int H, int T, int cse_v19, int cse_v2, int cse_v42);
extern "C" __global__ void __launch_bounds__(256) qrnn_kernel_3(float* __restrict__ W0_ptr, float* __restrict__ bias_ptr, float* __restrict__ cell_ptr, float* __restrict__ f_ptr, float* __restrict__ h_ptr, float* __restrict__ o_ptr, float* __restrict__ x_ptr, float* __restrict__ z_ptr, int B, int C, int H, int T, int cse_v3, int cse_v4, int cse_v7);
extern "C" __global__ void __launch_bounds__(1024) qrnn_kernel_4(float* __restrict__ W0_ptr, float* __restrict__ bias_ptr, float* __restrict__ cell_ptr, float* __restrict__ f_ptr, float* __restrict__ h_ptr, float* __restrict__ o_ptr, float* __restrict__ x_ptr, float* __restrict__ z_ptr, int B, int C, int H, int T, int cse_v3, int cse_v4, int cse_v7);
extern "C" __global__ void __launch_bounds__(256) qrnn_kernel_5(float* __restrict__ W0_ptr, float* __restrict__ bias_ptr, float* __restrict__ cell_ptr, float* __restrict__ f_ptr, float* __restrict__ h_ptr, float* __restrict__ o_ptr, float* __restrict__ x_ptr, float* __restrict__ z_ptr, int B, int C, int H, int T, int cse_v3, int cse_v4, int cse_v7, int t);
extern "C" __global__ void __launch_bounds__(256) qrnn_kernel(float* __restrict__ W0_ptr, float* __restrict__ W1_ptr, float* __restrict__ x_ptr, float* __restrict__ z_ptr, int B, int C, int H, int T, int cse_v19, int cse_v2, int cse_v42) {
  alignas(64) float z_acc_ptr[1];
  int cse_v13 = ((((int)blockIdx.x) * 256) + ((int)threadIdx.x));
  if (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) < cse_v19) {
    int cse_v20 = (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H);
    int cse_v21 = (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H);
    int cse_v28 = ((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) / cse_v2);
    int cse_v29 = ((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) % cse_v2);
    int cse_v48 = (((((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) / cse_v2) * T) + ((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) % cse_v2)) + 1) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H));
    z_ptr[(((((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) / cse_v2) * T) + ((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) % cse_v2)) + 1) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = 0x0p+0f/*0.000000e+00*/;
    if (0 < C) {
      z_acc_ptr[0] = z_ptr[(((((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) / cse_v2) * T) + ((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) % cse_v2)) + 1) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))];
      for (int c3 = 0; c3 < C; ++c3) {
        int cse_v30 = ((c3 * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H));
        z_acc_ptr[0] = (z_acc_ptr[0] + ((x_ptr[(((((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) % cse_v2) + 1) * B) + ((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) / cse_v2)) * C) + c3)] * W0_ptr[((c3 * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))]) + (x_ptr[((((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) % cse_v2) * B) + ((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) / cse_v2)) * C) + c3)] * W1_ptr[((c3 * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))])));
      }
      z_ptr[(((((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) / cse_v2) * T) + ((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) % cse_v2)) + 1) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = z_acc_ptr[0];
    }
  }
}

extern "C" __global__ void __launch_bounds__(256) qrnn_kernel_1(float* __restrict__ W0_ptr, float* __restrict__ W1_ptr, float* __restrict__ o_ptr, float* __restrict__ x_ptr, int B, int C, int H, int T, int cse_v19, int cse_v2, int cse_v3, int cse_v42) {
  alignas(64) float o_acc_ptr[1];
  int cse_v14 = ((((int)blockIdx.x) * 256) + ((int)threadIdx.x));
  if (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) < cse_v19) {
    int cse_v22 = (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H);
    int cse_v23 = (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H);
    int cse_v31 = ((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) / cse_v2);
    int cse_v32 = ((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) % cse_v2);
    int cse_v49 = (((((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) / cse_v2) * T) + ((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) % cse_v2)) + 1) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H));
    o_ptr[(((((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) / cse_v2) * T) + ((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) % cse_v2)) + 1) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = 0x0p+0f/*0.000000e+00*/;
    if (0 < C) {
      o_acc_ptr[0] = o_ptr[(((((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) / cse_v2) * T) + ((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) % cse_v2)) + 1) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))];
      for (int c3 = 0; c3 < C; ++c3) {
        int cse_v33 = (((cse_v3 + c3) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H));
        o_acc_ptr[0] = (o_acc_ptr[0] + ((x_ptr[(((((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) % cse_v2) + 1) * B) + ((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) / cse_v2)) * C) + c3)] * W0_ptr[(((cse_v3 + c3) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))]) + (x_ptr[((((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) % cse_v2) * B) + ((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) / cse_v2)) * C) + c3)] * W1_ptr[(((cse_v3 + c3) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))])));
      }
      o_ptr[(((((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) / cse_v2) * T) + ((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) % cse_v2)) + 1) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = o_acc_ptr[0];
    }
  }
}

extern "C" __global__ void __launch_bounds__(256) qrnn_kernel_2(float* __restrict__ W0_ptr, float* __restrict__ W1_ptr, float* __restrict__ f_ptr, float* __restrict__ x_ptr, int B, int C, int H, int T, int cse_v19, int cse_v2, int cse_v42) {
  alignas(64) float f_acc_ptr[1];
  int cse_v15 = ((((int)blockIdx.x) * 256) + ((int)threadIdx.x));
  if (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) < cse_v19) {
    int cse_v24 = (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H);
    int cse_v25 = (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H);
    int cse_v34 = ((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) / cse_v2);
    int cse_v35 = ((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) % cse_v2);
    int cse_v50 = (((((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) / cse_v2) * T) + ((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) % cse_v2)) + 1) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H));
    f_ptr[(((((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) / cse_v2) * T) + ((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) % cse_v2)) + 1) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = 0x0p+0f/*0.000000e+00*/;
    if (0 < C) {
      f_acc_ptr[0] = f_ptr[(((((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) / cse_v2) * T) + ((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) % cse_v2)) + 1) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))];
      for (int c3 = 0; c3 < C; ++c3) {
        int cse_v36 = (((C + c3) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H));
        f_acc_ptr[0] = (f_acc_ptr[0] + ((x_ptr[(((((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) % cse_v2) + 1) * B) + ((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) / cse_v2)) * C) + c3)] * W0_ptr[(((C + c3) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))]) + (x_ptr[((((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) % cse_v2) * B) + ((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) / cse_v2)) * C) + c3)] * W1_ptr[(((C + c3) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))])));
      }
      f_ptr[(((((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) / cse_v2) * T) + ((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) % cse_v2)) + 1) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = f_acc_ptr[0];
    }
  }
}

extern "C" __global__ void __launch_bounds__(256) qrnn_kernel_3(float* __restrict__ W0_ptr, float* __restrict__ bias_ptr, float* __restrict__ cell_ptr, float* __restrict__ f_ptr, float* __restrict__ h_ptr, float* __restrict__ o_ptr, float* __restrict__ x_ptr, float* __restrict__ z_ptr, int B, int C, int H, int T, int cse_v3, int cse_v4, int cse_v7) {
  alignas(64) float o_acc_ptr[1];
  alignas(64) float f_acc_ptr[1];
  alignas(64) float z_acc_ptr[1];
  for (int t = 0; t < T; ++t) {
    if (((0 < B) && (0 < H)) && (((int)threadIdx.x) < cse_v4)) {
      int cse_v5 = (((int)threadIdx.x) / H);
      int cse_v6 = (((int)threadIdx.x) % H);
      int cse_v16 = ((t * B) + (((int)threadIdx.x) / H));
      int cse_v43 = (((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H));
      if (t == 0) {
        f_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))] = 0x0p+0f/*0.000000e+00*/;
        o_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))] = 0x0p+0f/*0.000000e+00*/;
        z_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))] = 0x0p+0f/*0.000000e+00*/;
        if (0 < C) {
          o_acc_ptr[0] = o_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))];
          f_acc_ptr[0] = f_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))];
          z_acc_ptr[0] = z_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))];
          for (int c2 = 0; c2 < C; ++c2) {
            int cse_v37 = ((((t * B) + (((int)threadIdx.x) / H)) * C) + c2);
            o_acc_ptr[0] = (o_acc_ptr[0] + (x_ptr[((((t * B) + (((int)threadIdx.x) / H)) * C) + c2)] * W0_ptr[(((cse_v3 + c2) * H) + (((int)threadIdx.x) % H))]));
            f_acc_ptr[0] = (f_acc_ptr[0] + (x_ptr[((((t * B) + (((int)threadIdx.x) / H)) * C) + c2)] * W0_ptr[(((C + c2) * H) + (((int)threadIdx.x) % H))]));
            z_acc_ptr[0] = (z_acc_ptr[0] + (x_ptr[((((t * B) + (((int)threadIdx.x) / H)) * C) + c2)] * W0_ptr[((c2 * H) + (((int)threadIdx.x) % H))]));
          }
          o_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))] = o_acc_ptr[0];
          f_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))] = f_acc_ptr[0];
          z_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))] = z_acc_ptr[0];
        }
      }
      float bt = (f_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))] + bias_ptr[(H + (((int)threadIdx.x) % H))]);
      float bt_1 = (fabsf(bt) * -0x1p+0f/*-1.000000e+00*/);
      float bt_2 = floorf(((max(min(bt_1, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) * 0x1.715476p+0f/*1.442695e+00*/) + 0x1p-1f/*5.000000e-01*/));
      float bt_3 = ((max(min(bt_1, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) - (bt_2 * 0x1.63p-1f/*6.933594e-01*/)) + (bt_2 * 0x1.bd0106p-13f/*2.121944e-04*/));
      int bt_4 = ((int)bt_2);
        int v_ = ((bt_4 >> 1) * 8388608) + 1065353216;
        int v__1 = ((bt_4 * 8388608) + 1065353216) - ((bt_4 >> 1) * 8388608);
      float bt_5 = ((2139095040 < ((*(int *)(&(bt_1))) & 2147483647)) ? bt_1 : ((bt_1 < -0x1.5d589ep+6f/*-8.733654e+01*/) ? 0x0p+0f/*0.000000e+00*/ : (((((((0x1p-1f/*5.000000e-01*/ + ((0x1.555554p-3f/*1.666667e-01*/ + ((0x1.555382p-5f/*4.166580e-02*/ + ((0x1.11121p-7f/*8.333452e-03*/ + ((0x1.6e879cp-10f/*1.398200e-03*/ + (0x1.a0d2cep-13f/*1.987569e-04*/ * bt_3)) * bt_3)) * bt_3)) * bt_3)) * bt_3)) * bt_3) * bt_3) + bt_3) + 0x1p+0f/*1.000000e+00*/) * (*(float *)(&(v_)))) * (*(float *)(&(v__1))))));
      f_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))] = (((0x0p+0f/*0.000000e+00*/ <= bt) ? 0x1p+0f/*1.000000e+00*/ : bt_5) / (0x1p+0f/*1.000000e+00*/ + bt_5));
      float bt_6 = (z_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))] + bias_ptr[(((int)threadIdx.x) % H)]);
      float bt_7 = fabsf(bt_6);
      float bt_8 = (bt_6 * bt_6);
      float bt_9 = (bt_7 + bt_7);
      float bt_10 = floorf(((max(min(bt_9, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) * 0x1.715476p+0f/*1.442695e+00*/) + 0x1p-1f/*5.000000e-01*/));
      float bt_11 = ((max(min(bt_9, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) - (bt_10 * 0x1.63p-1f/*6.933594e-01*/)) + (bt_10 * 0x1.bd0106p-13f/*2.121944e-04*/));
      int bt_12 = ((int)bt_10);
        int v__2 = ((bt_12 >> 1) * 8388608) + 1065353216;
        int v__3 = ((bt_12 * 8388608) + 1065353216) - ((bt_12 >> 1) * 8388608);
      float bt_13 = (bt_7 + bt_7);
      float bt_14 = floorf(((max(min(bt_13, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) * 0x1.715476p+0f/*1.442695e+00*/) + 0x1p-1f/*5.000000e-01*/));
      float bt_15 = ((max(min(bt_13, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) - (bt_14 * 0x1.63p-1f/*6.933594e-01*/)) + (bt_14 * 0x1.bd0106p-13f/*2.121944e-04*/));
      int bt_16 = ((int)bt_14);
        int v__4 = ((bt_16 >> 1) * 8388608) + 1065353216;
        int v__5 = ((bt_16 * 8388608) + 1065353216) - ((bt_16 >> 1) * 8388608);
      z_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))] = ((2139095040 < ((*(int *)(&(bt_6))) & 2147483647)) ? bt_6 : ((bt_7 < 0x1.4p-1f/*6.250000e-01*/) ? (bt_6 + ((bt_6 * bt_8) * (-0x1.555532p-2f/*-3.333328e-01*/ + ((0x1.110726p-3f/*1.333144e-01*/ + ((-0x1.b83c5ap-5f/*-5.373972e-02*/ + ((0x1.52269cp-6f/*2.063909e-02*/ + (-0x1.75e1d4p-8f/*-5.704989e-03*/ * bt_8)) * bt_8)) * bt_8)) * bt_8)))) : ((bt_6 < 0x0p+0f/*0.000000e+00*/) ? ((0x1p+0f/*1.000000e+00*/ - (0x1p+1f/*2.000000e+00*/ / (((2139095040 < ((*(int *)(&(bt_9))) & 2147483647)) ? bt_9 : (((((((0x1p-1f/*5.000000e-01*/ + ((0x1.555554p-3f/*1.666667e-01*/ + ((0x1.555382p-5f/*4.166580e-02*/ + ((0x1.11121p-7f/*8.333452e-03*/ + ((0x1.6e879cp-10f/*1.398200e-03*/ + (0x1.a0d2cep-13f/*1.987569e-04*/ * bt_11)) * bt_11)) * bt_11)) * bt_11)) * bt_11)) * bt_11) * bt_11) + bt_11) + 0x1p+0f/*1.000000e+00*/) * (*(float *)(&(v__2)))) * (*(float *)(&(v__3))))) + 0x1p+0f/*1.000000e+00*/))) * -0x1p+0f/*-1.000000e+00*/) : (0x1p+0f/*1.000000e+00*/ - (0x1p+1f/*2.000000e+00*/ / (((2139095040 < ((*(int *)(&(bt_13))) & 2147483647)) ? bt_13 : (((((((0x1p-1f/*5.000000e-01*/ + ((0x1.555554p-3f/*1.666667e-01*/ + ((0x1.555382p-5f/*4.166580e-02*/ + ((0x1.11121p-7f/*8.333452e-03*/ + ((0x1.6e879cp-10f/*1.398200e-03*/ + (0x1.a0d2cep-13f/*1.987569e-04*/ * bt_15)) * bt_15)) * bt_15)) * bt_15)) * bt_15)) * bt_15) * bt_15) + bt_15) + 0x1p+0f/*1.000000e+00*/) * (*(float *)(&(v__4)))) * (*(float *)(&(v__5))))) + 0x1p+0f/*1.000000e+00*/))))));
      int cse_v38 = ((((t * B) + (((int)threadIdx.x) / H)) * H) + (((int)threadIdx.x) % H));
      if (1 <= t) {
        cell_ptr[((((t * B) + (((int)threadIdx.x) / H)) * H) + (((int)threadIdx.x) % H))] = ((f_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))] * cell_ptr[(((((t - 1) * B) + (((int)threadIdx.x) / H)) * H) + (((int)threadIdx.x) % H))]) + ((0x1p+0f/*1.000000e+00*/ - f_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))]) * z_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))]));
      }
      float bt_17 = (o_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))] + bias_ptr[(cse_v7 + (((int)threadIdx.x) % H))]);
      float bt_18 = (fabsf(bt_17) * -0x1p+0f/*-1.000000e+00*/);
      float bt_19 = floorf(((max(min(bt_18, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) * 0x1.715476p+0f/*1.442695e+00*/) + 0x1p-1f/*5.000000e-01*/));
      float bt_20 = ((max(min(bt_18, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) - (bt_19 * 0x1.63p-1f/*6.933594e-01*/)) + (bt_19 * 0x1.bd0106p-13f/*2.121944e-04*/));
      int bt_21 = ((int)bt_19);
        int v__6 = ((bt_21 >> 1) * 8388608) + 1065353216;
        int v__7 = ((bt_21 * 8388608) + 1065353216) - ((bt_21 >> 1) * 8388608);
      float bt_22 = ((2139095040 < ((*(int *)(&(bt_18))) & 2147483647)) ? bt_18 : ((bt_18 < -0x1.5d589ep+6f/*-8.733654e+01*/) ? 0x0p+0f/*0.000000e+00*/ : (((((((0x1p-1f/*5.000000e-01*/ + ((0x1.555554p-3f/*1.666667e-01*/ + ((0x1.555382p-5f/*4.166580e-02*/ + ((0x1.11121p-7f/*8.333452e-03*/ + ((0x1.6e879cp-10f/*1.398200e-03*/ + (0x1.a0d2cep-13f/*1.987569e-04*/ * bt_20)) * bt_20)) * bt_20)) * bt_20)) * bt_20)) * bt_20) * bt_20) + bt_20) + 0x1p+0f/*1.000000e+00*/) * (*(float *)(&(v__6)))) * (*(float *)(&(v__7))))));
      o_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))] = (((0x0p+0f/*0.000000e+00*/ <= bt_17) ? 0x1p+0f/*1.000000e+00*/ : bt_22) / (0x1p+0f/*1.000000e+00*/ + bt_22));
      if (t == 0) {
        cell_ptr[((((t * B) + (((int)threadIdx.x) / H)) * H) + (((int)threadIdx.x) % H))] = ((0x1p+0f/*1.000000e+00*/ - f_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))]) * z_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))]);
      }
      h_ptr[((((t * B) + (((int)threadIdx.x) / H)) * H) + (((int)threadIdx.x) % H))] = (o_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))] * cell_ptr[((((t * B) + (((int)threadIdx.x) / H)) * H) + (((int)threadIdx.x) % H))]);
    }
    __syncthreads();
  }
}

extern "C" __global__ void __launch_bounds__(1024) qrnn_kernel_4(float* __restrict__ W0_ptr, float* __restrict__ bias_ptr, float* __restrict__ cell_ptr, float* __restrict__ f_ptr, float* __restrict__ h_ptr, float* __restrict__ o_ptr, float* __restrict__ x_ptr, float* __restrict__ z_ptr, int B, int C, int H, int T, int cse_v3, int cse_v4, int cse_v7) {
  alignas(64) float o_acc_ptr[1];
  alignas(64) float f_acc_ptr[1];
  alignas(64) float z_acc_ptr[1];
  for (int t = 0; t < T; ++t) {
    if (((0 < B) && (0 < H)) && (((int)threadIdx.x) < cse_v4)) {
      int cse_v8 = (((int)threadIdx.x) / H);
      int cse_v9 = (((int)threadIdx.x) % H);
      int cse_v17 = ((t * B) + (((int)threadIdx.x) / H));
      int cse_v44 = (((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H));
      if (t == 0) {
        f_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))] = 0x0p+0f/*0.000000e+00*/;
        o_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))] = 0x0p+0f/*0.000000e+00*/;
        z_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))] = 0x0p+0f/*0.000000e+00*/;
        if (0 < C) {
          o_acc_ptr[0] = o_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))];
          f_acc_ptr[0] = f_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))];
          z_acc_ptr[0] = z_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))];
          for (int c2 = 0; c2 < C; ++c2) {
            int cse_v39 = ((((t * B) + (((int)threadIdx.x) / H)) * C) + c2);
            o_acc_ptr[0] = (o_acc_ptr[0] + (x_ptr[((((t * B) + (((int)threadIdx.x) / H)) * C) + c2)] * W0_ptr[(((cse_v3 + c2) * H) + (((int)threadIdx.x) % H))]));
            f_acc_ptr[0] = (f_acc_ptr[0] + (x_ptr[((((t * B) + (((int)threadIdx.x) / H)) * C) + c2)] * W0_ptr[(((C + c2) * H) + (((int)threadIdx.x) % H))]));
            z_acc_ptr[0] = (z_acc_ptr[0] + (x_ptr[((((t * B) + (((int)threadIdx.x) / H)) * C) + c2)] * W0_ptr[((c2 * H) + (((int)threadIdx.x) % H))]));
          }
          o_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))] = o_acc_ptr[0];
          f_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))] = f_acc_ptr[0];
          z_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))] = z_acc_ptr[0];
        }
      }
      float bt = (f_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))] + bias_ptr[(H + (((int)threadIdx.x) % H))]);
      float bt_1 = (fabsf(bt) * -0x1p+0f/*-1.000000e+00*/);
      float bt_2 = floorf(((max(min(bt_1, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) * 0x1.715476p+0f/*1.442695e+00*/) + 0x1p-1f/*5.000000e-01*/));
      float bt_3 = ((max(min(bt_1, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) - (bt_2 * 0x1.63p-1f/*6.933594e-01*/)) + (bt_2 * 0x1.bd0106p-13f/*2.121944e-04*/));
      int bt_4 = ((int)bt_2);
        int v_ = ((bt_4 >> 1) * 8388608) + 1065353216;
        int v__1 = ((bt_4 * 8388608) + 1065353216) - ((bt_4 >> 1) * 8388608);
      float bt_5 = ((2139095040 < ((*(int *)(&(bt_1))) & 2147483647)) ? bt_1 : ((bt_1 < -0x1.5d589ep+6f/*-8.733654e+01*/) ? 0x0p+0f/*0.000000e+00*/ : (((((((0x1p-1f/*5.000000e-01*/ + ((0x1.555554p-3f/*1.666667e-01*/ + ((0x1.555382p-5f/*4.166580e-02*/ + ((0x1.11121p-7f/*8.333452e-03*/ + ((0x1.6e879cp-10f/*1.398200e-03*/ + (0x1.a0d2cep-13f/*1.987569e-04*/ * bt_3)) * bt_3)) * bt_3)) * bt_3)) * bt_3)) * bt_3) * bt_3) + bt_3) + 0x1p+0f/*1.000000e+00*/) * (*(float *)(&(v_)))) * (*(float *)(&(v__1))))));
      f_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))] = (((0x0p+0f/*0.000000e+00*/ <= bt) ? 0x1p+0f/*1.000000e+00*/ : bt_5) / (0x1p+0f/*1.000000e+00*/ + bt_5));
      float bt_6 = (z_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))] + bias_ptr[(((int)threadIdx.x) % H)]);
      float bt_7 = fabsf(bt_6);
      float bt_8 = (bt_6 * bt_6);
      float bt_9 = (bt_7 + bt_7);
      float bt_10 = floorf(((max(min(bt_9, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) * 0x1.715476p+0f/*1.442695e+00*/) + 0x1p-1f/*5.000000e-01*/));
      float bt_11 = ((max(min(bt_9, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) - (bt_10 * 0x1.63p-1f/*6.933594e-01*/)) + (bt_10 * 0x1.bd0106p-13f/*2.121944e-04*/));
      int bt_12 = ((int)bt_10);
        int v__2 = ((bt_12 >> 1) * 8388608) + 1065353216;
        int v__3 = ((bt_12 * 8388608) + 1065353216) - ((bt_12 >> 1) * 8388608);
      float bt_13 = (bt_7 + bt_7);
      float bt_14 = floorf(((max(min(bt_13, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) * 0x1.715476p+0f/*1.442695e+00*/) + 0x1p-1f/*5.000000e-01*/));
      float bt_15 = ((max(min(bt_13, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) - (bt_14 * 0x1.63p-1f/*6.933594e-01*/)) + (bt_14 * 0x1.bd0106p-13f/*2.121944e-04*/));
      int bt_16 = ((int)bt_14);
        int v__4 = ((bt_16 >> 1) * 8388608) + 1065353216;
        int v__5 = ((bt_16 * 8388608) + 1065353216) - ((bt_16 >> 1) * 8388608);
      z_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))] = ((2139095040 < ((*(int *)(&(bt_6))) & 2147483647)) ? bt_6 : ((bt_7 < 0x1.4p-1f/*6.250000e-01*/) ? (bt_6 + ((bt_6 * bt_8) * (-0x1.555532p-2f/*-3.333328e-01*/ + ((0x1.110726p-3f/*1.333144e-01*/ + ((-0x1.b83c5ap-5f/*-5.373972e-02*/ + ((0x1.52269cp-6f/*2.063909e-02*/ + (-0x1.75e1d4p-8f/*-5.704989e-03*/ * bt_8)) * bt_8)) * bt_8)) * bt_8)))) : ((bt_6 < 0x0p+0f/*0.000000e+00*/) ? ((0x1p+0f/*1.000000e+00*/ - (0x1p+1f/*2.000000e+00*/ / (((2139095040 < ((*(int *)(&(bt_9))) & 2147483647)) ? bt_9 : (((((((0x1p-1f/*5.000000e-01*/ + ((0x1.555554p-3f/*1.666667e-01*/ + ((0x1.555382p-5f/*4.166580e-02*/ + ((0x1.11121p-7f/*8.333452e-03*/ + ((0x1.6e879cp-10f/*1.398200e-03*/ + (0x1.a0d2cep-13f/*1.987569e-04*/ * bt_11)) * bt_11)) * bt_11)) * bt_11)) * bt_11)) * bt_11) * bt_11) + bt_11) + 0x1p+0f/*1.000000e+00*/) * (*(float *)(&(v__2)))) * (*(float *)(&(v__3))))) + 0x1p+0f/*1.000000e+00*/))) * -0x1p+0f/*-1.000000e+00*/) : (0x1p+0f/*1.000000e+00*/ - (0x1p+1f/*2.000000e+00*/ / (((2139095040 < ((*(int *)(&(bt_13))) & 2147483647)) ? bt_13 : (((((((0x1p-1f/*5.000000e-01*/ + ((0x1.555554p-3f/*1.666667e-01*/ + ((0x1.555382p-5f/*4.166580e-02*/ + ((0x1.11121p-7f/*8.333452e-03*/ + ((0x1.6e879cp-10f/*1.398200e-03*/ + (0x1.a0d2cep-13f/*1.987569e-04*/ * bt_15)) * bt_15)) * bt_15)) * bt_15)) * bt_15)) * bt_15) * bt_15) + bt_15) + 0x1p+0f/*1.000000e+00*/) * (*(float *)(&(v__4)))) * (*(float *)(&(v__5))))) + 0x1p+0f/*1.000000e+00*/))))));
      int cse_v40 = ((((t * B) + (((int)threadIdx.x) / H)) * H) + (((int)threadIdx.x) % H));
      if (1 <= t) {
        cell_ptr[((((t * B) + (((int)threadIdx.x) / H)) * H) + (((int)threadIdx.x) % H))] = ((f_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))] * cell_ptr[(((((t - 1) * B) + (((int)threadIdx.x) / H)) * H) + (((int)threadIdx.x) % H))]) + ((0x1p+0f/*1.000000e+00*/ - f_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))]) * z_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))]));
      }
      float bt_17 = (o_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))] + bias_ptr[(cse_v7 + (((int)threadIdx.x) % H))]);
      float bt_18 = (fabsf(bt_17) * -0x1p+0f/*-1.000000e+00*/);
      float bt_19 = floorf(((max(min(bt_18, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) * 0x1.715476p+0f/*1.442695e+00*/) + 0x1p-1f/*5.000000e-01*/));
      float bt_20 = ((max(min(bt_18, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) - (bt_19 * 0x1.63p-1f/*6.933594e-01*/)) + (bt_19 * 0x1.bd0106p-13f/*2.121944e-04*/));
      int bt_21 = ((int)bt_19);
        int v__6 = ((bt_21 >> 1) * 8388608) + 1065353216;
        int v__7 = ((bt_21 * 8388608) + 1065353216) - ((bt_21 >> 1) * 8388608);
      float bt_22 = ((2139095040 < ((*(int *)(&(bt_18))) & 2147483647)) ? bt_18 : ((bt_18 < -0x1.5d589ep+6f/*-8.733654e+01*/) ? 0x0p+0f/*0.000000e+00*/ : (((((((0x1p-1f/*5.000000e-01*/ + ((0x1.555554p-3f/*1.666667e-01*/ + ((0x1.555382p-5f/*4.166580e-02*/ + ((0x1.11121p-7f/*8.333452e-03*/ + ((0x1.6e879cp-10f/*1.398200e-03*/ + (0x1.a0d2cep-13f/*1.987569e-04*/ * bt_20)) * bt_20)) * bt_20)) * bt_20)) * bt_20)) * bt_20) * bt_20) + bt_20) + 0x1p+0f/*1.000000e+00*/) * (*(float *)(&(v__6)))) * (*(float *)(&(v__7))))));
      o_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))] = (((0x0p+0f/*0.000000e+00*/ <= bt_17) ? 0x1p+0f/*1.000000e+00*/ : bt_22) / (0x1p+0f/*1.000000e+00*/ + bt_22));
      if (t == 0) {
        cell_ptr[((((t * B) + (((int)threadIdx.x) / H)) * H) + (((int)threadIdx.x) % H))] = ((0x1p+0f/*1.000000e+00*/ - f_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))]) * z_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))]);
      }
      h_ptr[((((t * B) + (((int)threadIdx.x) / H)) * H) + (((int)threadIdx.x) % H))] = (o_ptr[(((((((int)threadIdx.x) / H) * T) + t) * H) + (((int)threadIdx.x) % H))] * cell_ptr[((((t * B) + (((int)threadIdx.x) / H)) * H) + (((int)threadIdx.x) % H))]);
    }
    __syncthreads();
  }
}

extern "C" __global__ void __launch_bounds__(256) qrnn_kernel_5(float* __restrict__ W0_ptr, float* __restrict__ bias_ptr, float* __restrict__ cell_ptr, float* __restrict__ f_ptr, float* __restrict__ h_ptr, float* __restrict__ o_ptr, float* __restrict__ x_ptr, float* __restrict__ z_ptr, int B, int C, int H, int T, int cse_v3, int cse_v4, int cse_v7, int t) {
  alignas(64) float o_acc_ptr[1];
  alignas(64) float f_acc_ptr[1];
  alignas(64) float z_acc_ptr[1];
  int cse_v18 = ((((int)blockIdx.x) * 256) + ((int)threadIdx.x));
  if (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) < cse_v4) {
    int cse_v26 = (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H);
    int cse_v27 = (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H);
    int cse_v41 = ((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H));
    int cse_v47 = (((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * T) + t) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H));
    if (t == 0) {
      f_ptr[(((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * T) + t) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = 0x0p+0f/*0.000000e+00*/;
      o_ptr[(((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * T) + t) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = 0x0p+0f/*0.000000e+00*/;
      z_ptr[(((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * T) + t) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = 0x0p+0f/*0.000000e+00*/;
      if (0 < C) {
        o_acc_ptr[0] = o_ptr[(((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * T) + t) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))];
        f_acc_ptr[0] = f_ptr[(((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * T) + t) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))];
        z_acc_ptr[0] = z_ptr[(((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * T) + t) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))];
        for (int c2 = 0; c2 < C; ++c2) {
          int cse_v45 = ((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H)) * C) + c2);
          o_acc_ptr[0] = (o_acc_ptr[0] + (x_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H)) * C) + c2)] * W0_ptr[(((cse_v3 + c2) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))]));
          f_acc_ptr[0] = (f_acc_ptr[0] + (x_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H)) * C) + c2)] * W0_ptr[(((C + c2) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))]));
          z_acc_ptr[0] = (z_acc_ptr[0] + (x_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H)) * C) + c2)] * W0_ptr[((c2 * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))]));
        }
        o_ptr[(((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * T) + t) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = o_acc_ptr[0];
        f_ptr[(((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * T) + t) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = f_acc_ptr[0];
        z_ptr[(((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * T) + t) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = z_acc_ptr[0];
      }
    }
    float bt = (f_ptr[(((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * T) + t) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] + bias_ptr[(H + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))]);
    float bt_1 = (fabsf(bt) * -0x1p+0f/*-1.000000e+00*/);
    float bt_2 = floorf(((max(min(bt_1, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) * 0x1.715476p+0f/*1.442695e+00*/) + 0x1p-1f/*5.000000e-01*/));
    float bt_3 = ((max(min(bt_1, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) - (bt_2 * 0x1.63p-1f/*6.933594e-01*/)) + (bt_2 * 0x1.bd0106p-13f/*2.121944e-04*/));
    int bt_4 = ((int)bt_2);
      int v_ = ((bt_4 >> 1) * 8388608) + 1065353216;
      int v__1 = ((bt_4 * 8388608) + 1065353216) - ((bt_4 >> 1) * 8388608);
    float bt_5 = ((2139095040 < ((*(int *)(&(bt_1))) & 2147483647)) ? bt_1 : ((bt_1 < -0x1.5d589ep+6f/*-8.733654e+01*/) ? 0x0p+0f/*0.000000e+00*/ : (((((((0x1p-1f/*5.000000e-01*/ + ((0x1.555554p-3f/*1.666667e-01*/ + ((0x1.555382p-5f/*4.166580e-02*/ + ((0x1.11121p-7f/*8.333452e-03*/ + ((0x1.6e879cp-10f/*1.398200e-03*/ + (0x1.a0d2cep-13f/*1.987569e-04*/ * bt_3)) * bt_3)) * bt_3)) * bt_3)) * bt_3)) * bt_3) * bt_3) + bt_3) + 0x1p+0f/*1.000000e+00*/) * (*(float *)(&(v_)))) * (*(float *)(&(v__1))))));
    f_ptr[(((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * T) + t) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = (((0x0p+0f/*0.000000e+00*/ <= bt) ? 0x1p+0f/*1.000000e+00*/ : bt_5) / (0x1p+0f/*1.000000e+00*/ + bt_5));
    float bt_6 = (z_ptr[(((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * T) + t) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] + bias_ptr[(((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H)]);
    float bt_7 = fabsf(bt_6);
    float bt_8 = (bt_6 * bt_6);
    float bt_9 = (bt_7 + bt_7);
    float bt_10 = floorf(((max(min(bt_9, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) * 0x1.715476p+0f/*1.442695e+00*/) + 0x1p-1f/*5.000000e-01*/));
    float bt_11 = ((max(min(bt_9, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) - (bt_10 * 0x1.63p-1f/*6.933594e-01*/)) + (bt_10 * 0x1.bd0106p-13f/*2.121944e-04*/));
    int bt_12 = ((int)bt_10);
      int v__2 = ((bt_12 >> 1) * 8388608) + 1065353216;
      int v__3 = ((bt_12 * 8388608) + 1065353216) - ((bt_12 >> 1) * 8388608);
    float bt_13 = (bt_7 + bt_7);
    float bt_14 = floorf(((max(min(bt_13, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) * 0x1.715476p+0f/*1.442695e+00*/) + 0x1p-1f/*5.000000e-01*/));
    float bt_15 = ((max(min(bt_13, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) - (bt_14 * 0x1.63p-1f/*6.933594e-01*/)) + (bt_14 * 0x1.bd0106p-13f/*2.121944e-04*/));
    int bt_16 = ((int)bt_14);
      int v__4 = ((bt_16 >> 1) * 8388608) + 1065353216;
      int v__5 = ((bt_16 * 8388608) + 1065353216) - ((bt_16 >> 1) * 8388608);
    z_ptr[(((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * T) + t) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = ((2139095040 < ((*(int *)(&(bt_6))) & 2147483647)) ? bt_6 : ((bt_7 < 0x1.4p-1f/*6.250000e-01*/) ? (bt_6 + ((bt_6 * bt_8) * (-0x1.555532p-2f/*-3.333328e-01*/ + ((0x1.110726p-3f/*1.333144e-01*/ + ((-0x1.b83c5ap-5f/*-5.373972e-02*/ + ((0x1.52269cp-6f/*2.063909e-02*/ + (-0x1.75e1d4p-8f/*-5.704989e-03*/ * bt_8)) * bt_8)) * bt_8)) * bt_8)))) : ((bt_6 < 0x0p+0f/*0.000000e+00*/) ? ((0x1p+0f/*1.000000e+00*/ - (0x1p+1f/*2.000000e+00*/ / (((2139095040 < ((*(int *)(&(bt_9))) & 2147483647)) ? bt_9 : (((((((0x1p-1f/*5.000000e-01*/ + ((0x1.555554p-3f/*1.666667e-01*/ + ((0x1.555382p-5f/*4.166580e-02*/ + ((0x1.11121p-7f/*8.333452e-03*/ + ((0x1.6e879cp-10f/*1.398200e-03*/ + (0x1.a0d2cep-13f/*1.987569e-04*/ * bt_11)) * bt_11)) * bt_11)) * bt_11)) * bt_11)) * bt_11) * bt_11) + bt_11) + 0x1p+0f/*1.000000e+00*/) * (*(float *)(&(v__2)))) * (*(float *)(&(v__3))))) + 0x1p+0f/*1.000000e+00*/))) * -0x1p+0f/*-1.000000e+00*/) : (0x1p+0f/*1.000000e+00*/ - (0x1p+1f/*2.000000e+00*/ / (((2139095040 < ((*(int *)(&(bt_13))) & 2147483647)) ? bt_13 : (((((((0x1p-1f/*5.000000e-01*/ + ((0x1.555554p-3f/*1.666667e-01*/ + ((0x1.555382p-5f/*4.166580e-02*/ + ((0x1.11121p-7f/*8.333452e-03*/ + ((0x1.6e879cp-10f/*1.398200e-03*/ + (0x1.a0d2cep-13f/*1.987569e-04*/ * bt_15)) * bt_15)) * bt_15)) * bt_15)) * bt_15)) * bt_15) * bt_15) + bt_15) + 0x1p+0f/*1.000000e+00*/) * (*(float *)(&(v__4)))) * (*(float *)(&(v__5))))) + 0x1p+0f/*1.000000e+00*/))))));
    int cse_v46 = ((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H)) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H));
    if (1 <= t) {
      cell_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H)) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = ((f_ptr[(((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * T) + t) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] * cell_ptr[(((((t - 1) * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H)) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))]) + ((0x1p+0f/*1.000000e+00*/ - f_ptr[(((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * T) + t) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))]) * z_ptr[(((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * T) + t) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))]));
    }
    float bt_17 = (o_ptr[(((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * T) + t) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] + bias_ptr[(cse_v7 + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))]);
    float bt_18 = (fabsf(bt_17) * -0x1p+0f/*-1.000000e+00*/);
    float bt_19 = floorf(((max(min(bt_18, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) * 0x1.715476p+0f/*1.442695e+00*/) + 0x1p-1f/*5.000000e-01*/));
    float bt_20 = ((max(min(bt_18, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) - (bt_19 * 0x1.63p-1f/*6.933594e-01*/)) + (bt_19 * 0x1.bd0106p-13f/*2.121944e-04*/));
    int bt_21 = ((int)bt_19);
      int v__6 = ((bt_21 >> 1) * 8388608) + 1065353216;
      int v__7 = ((bt_21 * 8388608) + 1065353216) - ((bt_21 >> 1) * 8388608);
    float bt_22 = ((2139095040 < ((*(int *)(&(bt_18))) & 2147483647)) ? bt_18 : ((bt_18 < -0x1.5d589ep+6f/*-8.733654e+01*/) ? 0x0p+0f/*0.000000e+00*/ : (((((((0x1p-1f/*5.000000e-01*/ + ((0x1.555554p-3f/*1.666667e-01*/ + ((0x1.555382p-5f/*4.166580e-02*/ + ((0x1.11121p-7f/*8.333452e-03*/ + ((0x1.6e879cp-10f/*1.398200e-03*/ + (0x1.a0d2cep-13f/*1.987569e-04*/ * bt_20)) * bt_20)) * bt_20)) * bt_20)) * bt_20)) * bt_20) * bt_20) + bt_20) + 0x1p+0f/*1.000000e+00*/) * (*(float *)(&(v__6)))) * (*(float *)(&(v__7))))));
    o_ptr[(((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * T) + t) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = (((0x0p+0f/*0.000000e+00*/ <= bt_17) ? 0x1p+0f/*1.000000e+00*/ : bt_22) / (0x1p+0f/*1.000000e+00*/ + bt_22));
    if (t == 0) {
      cell_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H)) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = ((0x1p+0f/*1.000000e+00*/ - f_ptr[(((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * T) + t) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))]) * z_ptr[(((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * T) + t) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))]);
    }
    h_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H)) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = (o_ptr[(((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * T) + t) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] * cell_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H)) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))]);
  }
}

