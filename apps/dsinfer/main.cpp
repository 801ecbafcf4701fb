#include "commands.h"

int main(int argc, char** argv) { return dsinfer::cli::run_cli(argc, argv); }
