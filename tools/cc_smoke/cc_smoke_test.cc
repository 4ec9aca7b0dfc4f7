// A native kernel can live beside the Python layers without reworking the workspace.
#include <cstdio>

static int dot(const int* a, const int* b, int n) {
  int total = 0;
  for (int i = 0; i < n; ++i) total += a[i] * b[i];
  return total;
}

int main() {
  const int a[3] = {1, 2, 3};
  const int b[3] = {4, 5, 6};
  if (dot(a, b, 3) != 32) {
    std::fprintf(stderr, "dot product wrong\n");
    return 1;
  }
  return 0;
}
