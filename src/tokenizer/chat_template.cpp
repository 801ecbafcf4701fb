#include "tokenizer/chat_template.h"
