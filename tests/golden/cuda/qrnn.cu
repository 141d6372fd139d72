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
    z_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = tanhf((z_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] + bias_ptr[(((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H)]));
    f_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = (0x1p+0f/*1.000000e+00*/ / (0x1p+0f/*1.000000e+00*/ + expf((0x0p+0f/*0.000000e+00*/ - (f_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] + bias_ptr[(H + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))])))));
    int cse_v19 = ((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H)) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H));
    if (1 <= t) {
      cell_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H)) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = ((f_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] * cell_ptr[(((((t - 1) * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H)) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))]) + ((0x1p+0f/*1.000000e+00*/ - f_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))]) * z_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))]));
    }
    o_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = (0x1p+0f/*1.000000e+00*/ / (0x1p+0f/*1.000000e+00*/ + expf((0x0p+0f/*0.000000e+00*/ - (o_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] + bias_ptr[((H * 2) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))])))));
    if (t == 0) {
      cell_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H)) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = ((0x1p+0f/*1.000000e+00*/ - f_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))]) * z_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))]);
    }
    h_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H)) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] = (o_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))] * cell_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / H)) * H) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % H))]);
  }
}

