// Issue 30 step 39: 62472de's mma_q8_f32 (two exact magic-number floats and one FADD) gives the
// bits of the int64 conversion it replaced, (float)(2^16 D_h + 2^8 D_m + D_l), over every
// triple of edge values and 2e8 random triples in the pieces' ranges (|D_h| <= 2^17, |D_m|,
// |D_l| <= 2^19; a quarter of the draws shifted down, for small magnitudes).
// Build and run: g++ -O2 -ffp-contract=off -o f32-check f32-check.cpp && ./f32-check
// Output on the CPU machine (2026-12-06): f32-check.txt
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <random>
static float i2f(int v){float f; memcpy(&f,&v,4); return f;}
static float q8(int dh,int dm,int dl){ int hi=dh+(dm>>8), lo=((dm&255)<<8)+dl;
  float fh=i2f(0x53400000+hi)-824633720832.0f, fl=i2f(0x4B400000+lo)-12582912.0f; return fh+fl;}
int main(){ std::mt19937_64 r(7); long bad=0,n=0;
  int E[]={-131072,-131071,-1,0,1,131071,131072,-524288,524287,524288,-524287,255,256,-256,-255,128,-129};
  auto chk=[&](int a,int b,int c){ float x=q8(a,b,c), y=(float)((long long)a*65536+(long long)b*256+c); n++;
    if(memcmp(&x,&y,4)){ if(bad<5) printf("bad %d %d %d: %.9g %.9g\n",a,b,c,x,y); bad++; } };
  for(int a:E)for(int b:E)for(int c:E) if(a>=-131072&&a<=131072) chk(a,b,c);
  for(long i=0;i<200000000;i++){ int a=(int)(r()%262145)-131072, b=(int)(r()%1048577)-524288, c=(int)(r()%1048577)-524288;
    if(i%4==0){a>>= (r()%18); b>>=(r()%20);} chk(a,b,c);}
  printf("%ld of %ld differ\n",bad,n); return bad!=0; }
