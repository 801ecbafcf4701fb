// A Jinja subset interpreter for chat templates, as transformers renders them. (Being written.)
#pragma once
