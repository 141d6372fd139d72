extern "C" __global__ void __launch_bounds__(256) qrnn_kernel(float* __restrict__ W0_ptr, float* __restrict__ W1_ptr, float* __restrict__ bias_ptr, float* __restrict__ cell_ptr, float* __restrict__ f_ptr, float* __restrict__ h_ptr, float* __restrict__ o_ptr, float* __restrict__ x_ptr, float* __restrict__ z_ptr, int B, int C, int H, int cse_v1, int t);
extern "C" __global__ void __launch_bounds__(256) qrnn_kernel(float* __restrict__ W0_ptr, float* __restrict__ W1_ptr, float* __restrict__ bias_ptr, float* __restrict__ cell_ptr, float* __restrict__ f_ptr, float* __restrict__ h_ptr, float* __restrict__ o_ptr, float* __restrict__ x_ptr, float* __restrict__ z_ptr, int B, int C, int H, int cse_v1, int t) {
  alignas(64) float o_acc_ptr[1];
  alignas(64) float f_acc_ptr[1];
  alignas(64) float z_acc_ptr[1];
  alignas(64) float o_acc_ptr_1[1];
  alignas(64) float z_acc_ptr_1[1];
  alignas(64) float f_acc_ptr_1[1];
  int cse_v6 = ((((int)blockIdx.x) * 256) + ((int)threadIdx.x));
  if (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) < cse_v1) {
    int cse_v3 = (C * 2);
    int cse_v7 = (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H);
    int cse_v8 = (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H);
    int cse_v9 = ((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H));
    int cse_v11 = (((t - 1) * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H));
    int cse_v14 = (((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H));
    int cse_v15 = (((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H)) * C);
    if (1 <= t) {
      f_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = 0x0p+0f/*0.000000e+00*/;
      o_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = 0x0p+0f/*0.000000e+00*/;
      z_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = 0x0p+0f/*0.000000e+00*/;
      if (0 < C) {
        o_acc_ptr[0] = o_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))];
        f_acc_ptr[0] = f_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))];
        z_acc_ptr[0] = z_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))];
        for (int c2 = 0; c2 < C; ++c2) {
          int cse_v10 = ((((C * 2) + c2) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H));
          int cse_v16 = ((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H)) * C) + c2);
          int cse_v17 = (((((t - 1) * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H)) * C) + c2);
          o_acc_ptr[0] = (o_acc_ptr[0] + ((x_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H)) * C) + c2)] * W0_ptr[((((C * 2) + c2) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))]) + (x_ptr[(((((t - 1) * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H)) * C) + c2)] * W1_ptr[((((C * 2) + c2) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))])));
          int cse_v12 = (((C + c2) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H));
          f_acc_ptr[0] = (f_acc_ptr[0] + ((x_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H)) * C) + c2)] * W0_ptr[(((C + c2) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))]) + (x_ptr[(((((t - 1) * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H)) * C) + c2)] * W1_ptr[(((C + c2) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))])));
          int cse_v13 = ((c2 * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H));
          z_acc_ptr[0] = (z_acc_ptr[0] + ((x_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H)) * C) + c2)] * W0_ptr[((c2 * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))]) + (x_ptr[(((((t - 1) * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H)) * C) + c2)] * W1_ptr[((c2 * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))])));
        }
        o_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = o_acc_ptr[0];
        f_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = f_acc_ptr[0];
        z_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = z_acc_ptr[0];
      }
    } else {
      z_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = 0x0p+0f/*0.000000e+00*/;
      f_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = 0x0p+0f/*0.000000e+00*/;
      o_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = 0x0p+0f/*0.000000e+00*/;
      if (0 < C) {
        o_acc_ptr_1[0] = o_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))];
        z_acc_ptr_1[0] = z_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))];
        f_acc_ptr_1[0] = f_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))];
        for (int c2_1 = 0; c2_1 < C; ++c2_1) {
          int cse_v18 = ((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H)) * C) + c2_1);
          o_acc_ptr_1[0] = (o_acc_ptr_1[0] + (x_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H)) * C) + c2_1)] * W0_ptr[((((C * 2) + c2_1) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))]));
          z_acc_ptr_1[0] = (z_acc_ptr_1[0] + (x_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H)) * C) + c2_1)] * W0_ptr[((c2_1 * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))]));
          f_acc_ptr_1[0] = (f_acc_ptr_1[0] + (x_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H)) * C) + c2_1)] * W0_ptr[(((C + c2_1) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))]));
        }
        o_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = o_acc_ptr_1[0];
        z_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = z_acc_ptr_1[0];
        f_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = f_acc_ptr_1[0];
      }
    }
    float bt = (z_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] + bias_ptr[(((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H)]);
    float bt_1 = fabsf(bt);
    float bt_2 = (bt * bt);
    float bt_3 = (bt_1 + bt_1);
    float bt_4 = floorf(((max(min(bt_3, 0x1.64p+6f/*8.900000e+01*/), -0x1.ap+6f/*-1.040000e+02*/) * 0x1.715476p+0f/*1.442695e+00*/) + 0x1p-1f/*5.000000e-01*/));
    float bt_5 = ((max(min(bt_3, 0x1.64p+6f/*8.900000e+01*/), -0x1.ap+6f/*-1.040000e+02*/) - (bt_4 * 0x1.63p-1f/*6.933594e-01*/)) + (bt_4 * 0x1.bd0106p-13f/*2.121944e-04*/));
    int bt_6 = ((int)bt_4);
      int v_ = ((bt_6 >> 1) * 8388608) + 1065353216;
      int v__1 = ((bt_6 * 8388608) + 1065353216) - ((bt_6 >> 1) * 8388608);
    float bt_7 = (bt_1 + bt_1);
    float bt_8 = floorf(((max(min(bt_7, 0x1.64p+6f/*8.900000e+01*/), -0x1.ap+6f/*-1.040000e+02*/) * 0x1.715476p+0f/*1.442695e+00*/) + 0x1p-1f/*5.000000e-01*/));
    float bt_9 = ((max(min(bt_7, 0x1.64p+6f/*8.900000e+01*/), -0x1.ap+6f/*-1.040000e+02*/) - (bt_8 * 0x1.63p-1f/*6.933594e-01*/)) + (bt_8 * 0x1.bd0106p-13f/*2.121944e-04*/));
    int bt_10 = ((int)bt_8);
      int v__2 = ((bt_10 >> 1) * 8388608) + 1065353216;
      int v__3 = ((bt_10 * 8388608) + 1065353216) - ((bt_10 >> 1) * 8388608);
    z_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = ((bt_1 < 0x1.4p-1f/*6.250000e-01*/) ? (bt + ((bt * bt_2) * (-0x1.555532p-2f/*-3.333328e-01*/ + ((0x1.110726p-3f/*1.333144e-01*/ + ((-0x1.b83c5ap-5f/*-5.373972e-02*/ + ((0x1.52269cp-6f/*2.063909e-02*/ + (-0x1.75e1d4p-8f/*-5.704989e-03*/ * bt_2)) * bt_2)) * bt_2)) * bt_2)))) : ((bt < 0x0p+0f/*0.000000e+00*/) ? ((0x1p+0f/*1.000000e+00*/ - (0x1p+1f/*2.000000e+00*/ / ((((((((0x1p-1f/*5.000000e-01*/ + ((0x1.555554p-3f/*1.666667e-01*/ + ((0x1.555382p-5f/*4.166580e-02*/ + ((0x1.11121p-7f/*8.333452e-03*/ + ((0x1.6e879cp-10f/*1.398200e-03*/ + (0x1.a0d2cep-13f/*1.987569e-04*/ * bt_5)) * bt_5)) * bt_5)) * bt_5)) * bt_5)) * bt_5) * bt_5) + bt_5) + 0x1p+0f/*1.000000e+00*/) * (*(float *)(&(v_)))) * (*(float *)(&(v__1)))) + 0x1p+0f/*1.000000e+00*/))) * -0x1p+0f/*-1.000000e+00*/) : (0x1p+0f/*1.000000e+00*/ - (0x1p+1f/*2.000000e+00*/ / ((((((((0x1p-1f/*5.000000e-01*/ + ((0x1.555554p-3f/*1.666667e-01*/ + ((0x1.555382p-5f/*4.166580e-02*/ + ((0x1.11121p-7f/*8.333452e-03*/ + ((0x1.6e879cp-10f/*1.398200e-03*/ + (0x1.a0d2cep-13f/*1.987569e-04*/ * bt_9)) * bt_9)) * bt_9)) * bt_9)) * bt_9)) * bt_9) * bt_9) + bt_9) + 0x1p+0f/*1.000000e+00*/) * (*(float *)(&(v__2)))) * (*(float *)(&(v__3)))) + 0x1p+0f/*1.000000e+00*/)))));
    float bt_11 = (f_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] + bias_ptr[(H + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))]);
    float bt_12 = (fabsf(bt_11) * -0x1p+0f/*-1.000000e+00*/);
    float bt_13 = floorf(((max(min(bt_12, 0x1.64p+6f/*8.900000e+01*/), -0x1.ap+6f/*-1.040000e+02*/) * 0x1.715476p+0f/*1.442695e+00*/) + 0x1p-1f/*5.000000e-01*/));
    float bt_14 = ((max(min(bt_12, 0x1.64p+6f/*8.900000e+01*/), -0x1.ap+6f/*-1.040000e+02*/) - (bt_13 * 0x1.63p-1f/*6.933594e-01*/)) + (bt_13 * 0x1.bd0106p-13f/*2.121944e-04*/));
    int bt_15 = ((int)bt_13);
      int v__4 = ((bt_15 >> 1) * 8388608) + 1065353216;
      int v__5 = ((bt_15 * 8388608) + 1065353216) - ((bt_15 >> 1) * 8388608);
    float bt_16 = (((((((0x1p-1f/*5.000000e-01*/ + ((0x1.555554p-3f/*1.666667e-01*/ + ((0x1.555382p-5f/*4.166580e-02*/ + ((0x1.11121p-7f/*8.333452e-03*/ + ((0x1.6e879cp-10f/*1.398200e-03*/ + (0x1.a0d2cep-13f/*1.987569e-04*/ * bt_14)) * bt_14)) * bt_14)) * bt_14)) * bt_14)) * bt_14) * bt_14) + bt_14) + 0x1p+0f/*1.000000e+00*/) * (*(float *)(&(v__4)))) * (*(float *)(&(v__5))));
    f_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = ((0x0p+0f/*0.000000e+00*/ <= bt_11) ? (0x1p+0f/*1.000000e+00*/ / (0x1p+0f/*1.000000e+00*/ + bt_16)) : (bt_16 / (0x1p+0f/*1.000000e+00*/ + bt_16)));
    int cse_v19 = ((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H)) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H));
    if (1 <= t) {
      cell_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H)) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = ((f_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] * cell_ptr[(((((t - 1) * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H)) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))]) + ((0x1p+0f/*1.000000e+00*/ - f_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))]) * z_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))]));
    }
    float bt_17 = (o_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] + bias_ptr[((H * 2) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))]);
    float bt_18 = (fabsf(bt_17) * -0x1p+0f/*-1.000000e+00*/);
    float bt_19 = floorf(((max(min(bt_18, 0x1.64p+6f/*8.900000e+01*/), -0x1.ap+6f/*-1.040000e+02*/) * 0x1.715476p+0f/*1.442695e+00*/) + 0x1p-1f/*5.000000e-01*/));
    float bt_20 = ((max(min(bt_18, 0x1.64p+6f/*8.900000e+01*/), -0x1.ap+6f/*-1.040000e+02*/) - (bt_19 * 0x1.63p-1f/*6.933594e-01*/)) + (bt_19 * 0x1.bd0106p-13f/*2.121944e-04*/));
    int bt_21 = ((int)bt_19);
      int v__6 = ((bt_21 >> 1) * 8388608) + 1065353216;
      int v__7 = ((bt_21 * 8388608) + 1065353216) - ((bt_21 >> 1) * 8388608);
    float bt_22 = (((((((0x1p-1f/*5.000000e-01*/ + ((0x1.555554p-3f/*1.666667e-01*/ + ((0x1.555382p-5f/*4.166580e-02*/ + ((0x1.11121p-7f/*8.333452e-03*/ + ((0x1.6e879cp-10f/*1.398200e-03*/ + (0x1.a0d2cep-13f/*1.987569e-04*/ * bt_20)) * bt_20)) * bt_20)) * bt_20)) * bt_20)) * bt_20) * bt_20) + bt_20) + 0x1p+0f/*1.000000e+00*/) * (*(float *)(&(v__6)))) * (*(float *)(&(v__7))));
    o_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = ((0x0p+0f/*0.000000e+00*/ <= bt_17) ? (0x1p+0f/*1.000000e+00*/ / (0x1p+0f/*1.000000e+00*/ + bt_22)) : (bt_22 / (0x1p+0f/*1.000000e+00*/ + bt_22)));
    if (t == 0) {
      cell_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H)) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = ((0x1p+0f/*1.000000e+00*/ - f_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))]) * z_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))]);
    }
    h_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H)) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = (o_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] * cell_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H)) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))]);
  }
}

