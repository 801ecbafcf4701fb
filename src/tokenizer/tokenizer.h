// Byte-level BPE exactly as Hugging Face `tokenizers` runs DeepSeek's tokenizer.json, with
// transformers' BOS handling from tokenizer_config.json. (Being written; see tests/tokenizer_test.cpp.)
#pragma once
