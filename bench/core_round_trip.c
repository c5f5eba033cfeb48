// How long a cache line takes to go from core 0 to core 1 and back: two threads, one pinned to
// each, bounce a counter (best of 5 runs of 20,000 round trips; prints nanoseconds). On a VM the
// two vCPUs may share a core complex (an L3) or not, and the hypervisor moves them: the 2-vCPU
// Zen 4 host of session 26 read 50-75 ns for minutes, then 350-400 ns for minutes, and GPT-2
// small's step took 10.5 and 16-17 ms in those phases (bench/README.md, "Session 26").
// bench/train_tokens_per_s.sh builds and runs it around each round.
//   cc -O2 -pthread bench/core_round_trip.c -o round_trip && ./round_trip [CPU_A CPU_B]
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { kTrips = 20000, kRuns = 5 };
static _Alignas(64) atomic_long flag;
static atomic_int failed;
static int cpu_b = 1;

static double Now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int Pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof set, &set);
}

static void* Pong(void* arg) {
  (void)arg;
  if (Pin(cpu_b) != 0) {
    atomic_store(&failed, 1);  // main gives up
    return NULL;
  }
  for (long r = 0; r < (long)kRuns * kTrips; ++r) {
    while (atomic_load_explicit(&flag, memory_order_acquire) != 2 * r + 1) {}
    atomic_store_explicit(&flag, 2 * r + 2, memory_order_release);
  }
  return NULL;
}

int main(int argc, char** argv) {
  const int cpu_a = argc > 2 ? atoi(argv[1]) : 0;
  if (argc > 2) cpu_b = atoi(argv[2]);
  if (Pin(cpu_a) != 0) {
    fprintf(stderr, "core_round_trip: cannot run on cpu %d\n", cpu_a);
    return 1;
  }
  pthread_t pong;
  if (pthread_create(&pong, NULL, Pong, NULL) != 0) return 1;
  double best = 1e9;
  long r = 0;
  for (int run = 0; run < kRuns; ++run) {
    const double t0 = Now();
    for (int i = 0; i < kTrips; ++i, ++r) {
      atomic_store_explicit(&flag, 2 * r + 1, memory_order_release);
      while (atomic_load_explicit(&flag, memory_order_acquire) != 2 * r + 2) {
        if (atomic_load_explicit(&failed, memory_order_relaxed)) {
          fprintf(stderr, "core_round_trip: cannot run on cpu %d\n", cpu_b);
          return 1;
        }
      }
    }
    const double ns = (Now() - t0) / kTrips * 1e9;
    if (ns < best) best = ns;
  }
  pthread_join(pong, NULL);
  printf("%.0f\n", best);
  return 0;
}
