extern "C" __global__ void __launch_bounds__(256) elman_rnn_kernel(float* __restrict__ hidden_in_ptr, float* __restrict__ i2h_ptr, float* __restrict__ input_ptr, int B, int Ci, int Co, int cse_v7);
extern "C" __global__ void __launch_bounds__(256) elman_rnn_kernel_1(float* __restrict__ h0_ptr, float* __restrict__ h2h_ptr, float* __restrict__ hidden_ptr, float* __restrict__ hidden_in_ptr, int B, int Co, int T, int cse_v2);
extern "C" __global__ void __launch_bounds__(1024) elman_rnn_kernel_2(float* __restrict__ h0_ptr, float* __restrict__ h2h_ptr, float* __restrict__ hidden_ptr, float* __restrict__ hidden_in_ptr, int B, int Co, int T, int cse_v2);
extern "C" __global__ void __launch_bounds__(256) elman_rnn_kernel_3(float* __restrict__ h0_ptr, float* __restrict__ h2h_ptr, float* __restrict__ hidden_ptr, float* __restrict__ hidden_in_ptr, int B, int Co, int cse_v2, int t);
extern "C" __global__ void __launch_bounds__(256) elman_rnn_kernel(float* __restrict__ hidden_in_ptr, float* __restrict__ i2h_ptr, float* __restrict__ input_ptr, int B, int Ci, int Co, int cse_v7) {
  alignas(64) float hidden_in_acc_ptr[1];
  int cse_v8 = ((((int)blockIdx.x) * 256) + ((int)threadIdx.x));
  if (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) < cse_v7) {
    int cse_v10 = (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co);
    int cse_v11 = (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co);
    int cse_v16 = ((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co) / B) * B) + ((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co) % B));
    int cse_v18 = ((((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co) / B) * B) + ((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co) % B)) * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co));
    hidden_in_ptr[((((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co) / B) * B) + ((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co) % B)) * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))] = 0x0p+0f/*0.000000e+00*/;
    if (0 < Ci) {
      hidden_in_acc_ptr[0] = hidden_in_ptr[((((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co) / B) * B) + ((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co) % B)) * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))];
      for (int c3 = 0; c3 < Ci; ++c3) {
        hidden_in_acc_ptr[0] = (hidden_in_acc_ptr[0] + (i2h_ptr[((c3 * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))] * input_ptr[((((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co) / B) * B) + ((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co) % B)) * Ci) + c3)]));
      }
      hidden_in_ptr[((((((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co) / B) * B) + ((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co) % B)) * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))] = hidden_in_acc_ptr[0];
    }
  }
}

extern "C" __global__ void __launch_bounds__(256) elman_rnn_kernel_1(float* __restrict__ h0_ptr, float* __restrict__ h2h_ptr, float* __restrict__ hidden_ptr, float* __restrict__ hidden_in_ptr, int B, int Co, int T, int cse_v2) {
  alignas(64) float hidden_acc_ptr[1];
  alignas(64) float hidden_acc_ptr_1[1];
  for (int t = 0; t < T; ++t) {
    if (((0 < B) && (0 < Co)) && (((int)threadIdx.x) < cse_v2)) {
      int cse_v3 = (((int)threadIdx.x) / Co);
      int cse_v4 = (((int)threadIdx.x) % Co);
      int cse_v14 = ((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co));
      if (1 <= t) {
        hidden_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))] = 0x0p+0f/*0.000000e+00*/;
        hidden_acc_ptr[0] = hidden_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))];
        for (int c2 = 0; c2 < Co; ++c2) {
          hidden_acc_ptr[0] = (hidden_acc_ptr[0] + (h2h_ptr[((c2 * Co) + (((int)threadIdx.x) % Co))] * hidden_ptr[(((((t - 1) * B) + (((int)threadIdx.x) / Co)) * Co) + c2)]));
        }
        hidden_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))] = hidden_acc_ptr[0];
      } else {
        hidden_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))] = 0x0p+0f/*0.000000e+00*/;
        hidden_acc_ptr_1[0] = hidden_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))];
        for (int c2_1 = 0; c2_1 < Co; ++c2_1) {
          hidden_acc_ptr_1[0] = (hidden_acc_ptr_1[0] + (h2h_ptr[((c2_1 * Co) + (((int)threadIdx.x) % Co))] * h0_ptr[(((((int)threadIdx.x) / Co) * Co) + c2_1)]));
        }
        hidden_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))] = hidden_acc_ptr_1[0];
      }
      hidden_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))] = (hidden_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))] + hidden_in_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))]);
      float bt = fabsf(hidden_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))]);
        float v_ = hidden_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))];
      float condval;
      if (2139095040 < ((*(int *)(&(v_))) & 2147483647)) {
        condval = hidden_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))];
      } else {
        float condval_1;
        if (bt < 0x1.4p-1f/*6.250000e-01*/) {
          float bt_1 = (hidden_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))] * hidden_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))]);
          condval_1 = (hidden_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))] + ((hidden_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))] * bt_1) * (-0x1.555532p-2f/*-3.333328e-01*/ + ((0x1.110726p-3f/*1.333144e-01*/ + ((-0x1.b83c5ap-5f/*-5.373972e-02*/ + ((0x1.52269cp-6f/*2.063909e-02*/ + (-0x1.75e1d4p-8f/*-5.704989e-03*/ * bt_1)) * bt_1)) * bt_1)) * bt_1))));
        } else {
          float bt_2 = (bt + bt);
          float bt_3 = floorf(((max(min(bt_2, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) * 0x1.715476p+0f/*1.442695e+00*/) + 0x1p-1f/*5.000000e-01*/));
          float bt_4 = ((max(min(bt_2, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) - (bt_3 * 0x1.63p-1f/*6.933594e-01*/)) + (bt_3 * 0x1.bd0106p-13f/*2.121944e-04*/));
          int bt_5 = ((int)bt_3);
            int v__1 = ((bt_5 >> 1) * 8388608) + 1065353216;
            int v__2 = ((bt_5 * 8388608) + 1065353216) - ((bt_5 >> 1) * 8388608);
          float bt_6 = (bt + bt);
          float bt_7 = floorf(((max(min(bt_6, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) * 0x1.715476p+0f/*1.442695e+00*/) + 0x1p-1f/*5.000000e-01*/));
          float bt_8 = ((max(min(bt_6, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) - (bt_7 * 0x1.63p-1f/*6.933594e-01*/)) + (bt_7 * 0x1.bd0106p-13f/*2.121944e-04*/));
          int bt_9 = ((int)bt_7);
            int v__3 = ((bt_9 >> 1) * 8388608) + 1065353216;
            int v__4 = ((bt_9 * 8388608) + 1065353216) - ((bt_9 >> 1) * 8388608);
          condval_1 = ((hidden_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))] < 0x0p+0f/*0.000000e+00*/) ? ((0x1p+0f/*1.000000e+00*/ - (0x1p+1f/*2.000000e+00*/ / (((2139095040 < ((*(int *)(&(bt_2))) & 2147483647)) ? bt_2 : (((((((0x1p-1f/*5.000000e-01*/ + ((0x1.555554p-3f/*1.666667e-01*/ + ((0x1.555382p-5f/*4.166580e-02*/ + ((0x1.11121p-7f/*8.333452e-03*/ + ((0x1.6e879cp-10f/*1.398200e-03*/ + (0x1.a0d2cep-13f/*1.987569e-04*/ * bt_4)) * bt_4)) * bt_4)) * bt_4)) * bt_4)) * bt_4) * bt_4) + bt_4) + 0x1p+0f/*1.000000e+00*/) * (*(float *)(&(v__1)))) * (*(float *)(&(v__2))))) + 0x1p+0f/*1.000000e+00*/))) * -0x1p+0f/*-1.000000e+00*/) : (0x1p+0f/*1.000000e+00*/ - (0x1p+1f/*2.000000e+00*/ / (((2139095040 < ((*(int *)(&(bt_6))) & 2147483647)) ? bt_6 : (((((((0x1p-1f/*5.000000e-01*/ + ((0x1.555554p-3f/*1.666667e-01*/ + ((0x1.555382p-5f/*4.166580e-02*/ + ((0x1.11121p-7f/*8.333452e-03*/ + ((0x1.6e879cp-10f/*1.398200e-03*/ + (0x1.a0d2cep-13f/*1.987569e-04*/ * bt_8)) * bt_8)) * bt_8)) * bt_8)) * bt_8)) * bt_8) * bt_8) + bt_8) + 0x1p+0f/*1.000000e+00*/) * (*(float *)(&(v__3)))) * (*(float *)(&(v__4))))) + 0x1p+0f/*1.000000e+00*/))));
        }
        condval = condval_1;
      }
      hidden_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))] = condval;
    }
    __syncthreads();
  }
}

extern "C" __global__ void __launch_bounds__(1024) elman_rnn_kernel_2(float* __restrict__ h0_ptr, float* __restrict__ h2h_ptr, float* __restrict__ hidden_ptr, float* __restrict__ hidden_in_ptr, int B, int Co, int T, int cse_v2) {
  alignas(64) float hidden_acc_ptr[1];
  alignas(64) float hidden_acc_ptr_1[1];
  for (int t = 0; t < T; ++t) {
    if (((0 < B) && (0 < Co)) && (((int)threadIdx.x) < cse_v2)) {
      int cse_v5 = (((int)threadIdx.x) / Co);
      int cse_v6 = (((int)threadIdx.x) % Co);
      int cse_v15 = ((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co));
      if (1 <= t) {
        hidden_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))] = 0x0p+0f/*0.000000e+00*/;
        hidden_acc_ptr[0] = hidden_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))];
        for (int c2 = 0; c2 < Co; ++c2) {
          hidden_acc_ptr[0] = (hidden_acc_ptr[0] + (h2h_ptr[((c2 * Co) + (((int)threadIdx.x) % Co))] * hidden_ptr[(((((t - 1) * B) + (((int)threadIdx.x) / Co)) * Co) + c2)]));
        }
        hidden_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))] = hidden_acc_ptr[0];
      } else {
        hidden_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))] = 0x0p+0f/*0.000000e+00*/;
        hidden_acc_ptr_1[0] = hidden_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))];
        for (int c2_1 = 0; c2_1 < Co; ++c2_1) {
          hidden_acc_ptr_1[0] = (hidden_acc_ptr_1[0] + (h2h_ptr[((c2_1 * Co) + (((int)threadIdx.x) % Co))] * h0_ptr[(((((int)threadIdx.x) / Co) * Co) + c2_1)]));
        }
        hidden_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))] = hidden_acc_ptr_1[0];
      }
      hidden_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))] = (hidden_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))] + hidden_in_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))]);
      float bt = fabsf(hidden_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))]);
        float v_ = hidden_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))];
      float condval;
      if (2139095040 < ((*(int *)(&(v_))) & 2147483647)) {
        condval = hidden_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))];
      } else {
        float condval_1;
        if (bt < 0x1.4p-1f/*6.250000e-01*/) {
          float bt_1 = (hidden_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))] * hidden_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))]);
          condval_1 = (hidden_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))] + ((hidden_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))] * bt_1) * (-0x1.555532p-2f/*-3.333328e-01*/ + ((0x1.110726p-3f/*1.333144e-01*/ + ((-0x1.b83c5ap-5f/*-5.373972e-02*/ + ((0x1.52269cp-6f/*2.063909e-02*/ + (-0x1.75e1d4p-8f/*-5.704989e-03*/ * bt_1)) * bt_1)) * bt_1)) * bt_1))));
        } else {
          float bt_2 = (bt + bt);
          float bt_3 = floorf(((max(min(bt_2, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) * 0x1.715476p+0f/*1.442695e+00*/) + 0x1p-1f/*5.000000e-01*/));
          float bt_4 = ((max(min(bt_2, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) - (bt_3 * 0x1.63p-1f/*6.933594e-01*/)) + (bt_3 * 0x1.bd0106p-13f/*2.121944e-04*/));
          int bt_5 = ((int)bt_3);
            int v__1 = ((bt_5 >> 1) * 8388608) + 1065353216;
            int v__2 = ((bt_5 * 8388608) + 1065353216) - ((bt_5 >> 1) * 8388608);
          float bt_6 = (bt + bt);
          float bt_7 = floorf(((max(min(bt_6, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) * 0x1.715476p+0f/*1.442695e+00*/) + 0x1p-1f/*5.000000e-01*/));
          float bt_8 = ((max(min(bt_6, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) - (bt_7 * 0x1.63p-1f/*6.933594e-01*/)) + (bt_7 * 0x1.bd0106p-13f/*2.121944e-04*/));
          int bt_9 = ((int)bt_7);
            int v__3 = ((bt_9 >> 1) * 8388608) + 1065353216;
            int v__4 = ((bt_9 * 8388608) + 1065353216) - ((bt_9 >> 1) * 8388608);
          condval_1 = ((hidden_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))] < 0x0p+0f/*0.000000e+00*/) ? ((0x1p+0f/*1.000000e+00*/ - (0x1p+1f/*2.000000e+00*/ / (((2139095040 < ((*(int *)(&(bt_2))) & 2147483647)) ? bt_2 : (((((((0x1p-1f/*5.000000e-01*/ + ((0x1.555554p-3f/*1.666667e-01*/ + ((0x1.555382p-5f/*4.166580e-02*/ + ((0x1.11121p-7f/*8.333452e-03*/ + ((0x1.6e879cp-10f/*1.398200e-03*/ + (0x1.a0d2cep-13f/*1.987569e-04*/ * bt_4)) * bt_4)) * bt_4)) * bt_4)) * bt_4)) * bt_4) * bt_4) + bt_4) + 0x1p+0f/*1.000000e+00*/) * (*(float *)(&(v__1)))) * (*(float *)(&(v__2))))) + 0x1p+0f/*1.000000e+00*/))) * -0x1p+0f/*-1.000000e+00*/) : (0x1p+0f/*1.000000e+00*/ - (0x1p+1f/*2.000000e+00*/ / (((2139095040 < ((*(int *)(&(bt_6))) & 2147483647)) ? bt_6 : (((((((0x1p-1f/*5.000000e-01*/ + ((0x1.555554p-3f/*1.666667e-01*/ + ((0x1.555382p-5f/*4.166580e-02*/ + ((0x1.11121p-7f/*8.333452e-03*/ + ((0x1.6e879cp-10f/*1.398200e-03*/ + (0x1.a0d2cep-13f/*1.987569e-04*/ * bt_8)) * bt_8)) * bt_8)) * bt_8)) * bt_8)) * bt_8) * bt_8) + bt_8) + 0x1p+0f/*1.000000e+00*/) * (*(float *)(&(v__3)))) * (*(float *)(&(v__4))))) + 0x1p+0f/*1.000000e+00*/))));
        }
        condval = condval_1;
      }
      hidden_ptr[((((t * B) + (((int)threadIdx.x) / Co)) * Co) + (((int)threadIdx.x) % Co))] = condval;
    }
    __syncthreads();
  }
}

extern "C" __global__ void __launch_bounds__(256) elman_rnn_kernel_3(float* __restrict__ h0_ptr, float* __restrict__ h2h_ptr, float* __restrict__ hidden_ptr, float* __restrict__ hidden_in_ptr, int B, int Co, int cse_v2, int t) {
  alignas(64) float hidden_acc_ptr[1];
  alignas(64) float hidden_acc_ptr_1[1];
  int cse_v9 = ((((int)blockIdx.x) * 256) + ((int)threadIdx.x));
  if (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) < cse_v2) {
    int cse_v12 = (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co);
    int cse_v13 = (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co);
    int cse_v17 = ((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co)) * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co));
    if (1 <= t) {
      hidden_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co)) * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))] = 0x0p+0f/*0.000000e+00*/;
      hidden_acc_ptr[0] = hidden_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co)) * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))];
      for (int c2 = 0; c2 < Co; ++c2) {
        hidden_acc_ptr[0] = (hidden_acc_ptr[0] + (h2h_ptr[((c2 * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))] * hidden_ptr[(((((t - 1) * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co)) * Co) + c2)]));
      }
      hidden_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co)) * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))] = hidden_acc_ptr[0];
    } else {
      hidden_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co)) * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))] = 0x0p+0f/*0.000000e+00*/;
      hidden_acc_ptr_1[0] = hidden_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co)) * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))];
      for (int c2_1 = 0; c2_1 < Co; ++c2_1) {
        hidden_acc_ptr_1[0] = (hidden_acc_ptr_1[0] + (h2h_ptr[((c2_1 * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))] * h0_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co) * Co) + c2_1)]));
      }
      hidden_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co)) * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))] = hidden_acc_ptr_1[0];
    }
    hidden_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co)) * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))] = (hidden_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co)) * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))] + hidden_in_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co)) * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))]);
    float bt = fabsf(hidden_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co)) * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))]);
      float v_ = hidden_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co)) * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))];
    float condval;
    if (2139095040 < ((*(int *)(&(v_))) & 2147483647)) {
      condval = hidden_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co)) * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))];
    } else {
      float condval_1;
      if (bt < 0x1.4p-1f/*6.250000e-01*/) {
        float bt_1 = (hidden_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co)) * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))] * hidden_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co)) * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))]);
        condval_1 = (hidden_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co)) * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))] + ((hidden_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co)) * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))] * bt_1) * (-0x1.555532p-2f/*-3.333328e-01*/ + ((0x1.110726p-3f/*1.333144e-01*/ + ((-0x1.b83c5ap-5f/*-5.373972e-02*/ + ((0x1.52269cp-6f/*2.063909e-02*/ + (-0x1.75e1d4p-8f/*-5.704989e-03*/ * bt_1)) * bt_1)) * bt_1)) * bt_1))));
      } else {
        float bt_2 = (bt + bt);
        float bt_3 = floorf(((max(min(bt_2, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) * 0x1.715476p+0f/*1.442695e+00*/) + 0x1p-1f/*5.000000e-01*/));
        float bt_4 = ((max(min(bt_2, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) - (bt_3 * 0x1.63p-1f/*6.933594e-01*/)) + (bt_3 * 0x1.bd0106p-13f/*2.121944e-04*/));
        int bt_5 = ((int)bt_3);
          int v__1 = ((bt_5 >> 1) * 8388608) + 1065353216;
          int v__2 = ((bt_5 * 8388608) + 1065353216) - ((bt_5 >> 1) * 8388608);
        float bt_6 = (bt + bt);
        float bt_7 = floorf(((max(min(bt_6, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) * 0x1.715476p+0f/*1.442695e+00*/) + 0x1p-1f/*5.000000e-01*/));
        float bt_8 = ((max(min(bt_6, 0x1.64p+6f/*8.900000e+01*/), -0x1.5d589ep+6f/*-8.733654e+01*/) - (bt_7 * 0x1.63p-1f/*6.933594e-01*/)) + (bt_7 * 0x1.bd0106p-13f/*2.121944e-04*/));
        int bt_9 = ((int)bt_7);
          int v__3 = ((bt_9 >> 1) * 8388608) + 1065353216;
          int v__4 = ((bt_9 * 8388608) + 1065353216) - ((bt_9 >> 1) * 8388608);
        condval_1 = ((hidden_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co)) * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))] < 0x0p+0f/*0.000000e+00*/) ? ((0x1p+0f/*1.000000e+00*/ - (0x1p+1f/*2.000000e+00*/ / (((2139095040 < ((*(int *)(&(bt_2))) & 2147483647)) ? bt_2 : (((((((0x1p-1f/*5.000000e-01*/ + ((0x1.555554p-3f/*1.666667e-01*/ + ((0x1.555382p-5f/*4.166580e-02*/ + ((0x1.11121p-7f/*8.333452e-03*/ + ((0x1.6e879cp-10f/*1.398200e-03*/ + (0x1.a0d2cep-13f/*1.987569e-04*/ * bt_4)) * bt_4)) * bt_4)) * bt_4)) * bt_4)) * bt_4) * bt_4) + bt_4) + 0x1p+0f/*1.000000e+00*/) * (*(float *)(&(v__1)))) * (*(float *)(&(v__2))))) + 0x1p+0f/*1.000000e+00*/))) * -0x1p+0f/*-1.000000e+00*/) : (0x1p+0f/*1.000000e+00*/ - (0x1p+1f/*2.000000e+00*/ / (((2139095040 < ((*(int *)(&(bt_6))) & 2147483647)) ? bt_6 : (((((((0x1p-1f/*5.000000e-01*/ + ((0x1.555554p-3f/*1.666667e-01*/ + ((0x1.555382p-5f/*4.166580e-02*/ + ((0x1.11121p-7f/*8.333452e-03*/ + ((0x1.6e879cp-10f/*1.398200e-03*/ + (0x1.a0d2cep-13f/*1.987569e-04*/ * bt_8)) * bt_8)) * bt_8)) * bt_8)) * bt_8)) * bt_8) * bt_8) + bt_8) + 0x1p+0f/*1.000000e+00*/) * (*(float *)(&(v__3)))) * (*(float *)(&(v__4))))) + 0x1p+0f/*1.000000e+00*/))));
      }
      condval = condval_1;
    }
    hidden_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co)) * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))] = condval;
  }
}

