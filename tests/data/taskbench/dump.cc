#include "core.h"
int main(int argc, char **argv) { App app(argc, argv); app.verbose = 2; app.display(); return 0; }
