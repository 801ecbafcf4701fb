// Semantics of the Jinja subset against jinja2 3.1.6 as transformers configures it
// (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, transformers'
// tojson). The expected strings of the two tables were produced by jinja2 itself.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "chat/chat_template.h"
#include "core/error.h"
#include "test_support.h"  // EXPECT_CONTAINS

namespace dsinfer::jinja_semantics_test {
namespace {

using json = nlohmann::json;

struct Case {
  const char* tmpl;
  const char* expected;  // rendered text, or a substring of the error message
};

std::string render(const std::string& tmpl, const json& ctx = json::object()) {
  return ChatTemplate(tmpl).render(ctx);
}

// The message of the dsinfer::Error that parsing or rendering throws ("" if none).
std::string error_of(const std::string& tmpl, const json& ctx = json::object()) {
  try {
    ChatTemplate(tmpl).render(ctx);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Renders that succeed in jinja2, with jinja2's output.
const Case kRenders[] = {
    // trim
    {"{% if true %}\nyes\n{% endif %}\nafter", "yes\nafter"},
    {"  {% if true %}\n    x\n  {% endif %}\ny", "    x\ny"},
    {"a\n  {% for i in [1, 2] %}\n  - {{ i }}\n  {% endfor %}\nb", "a\n  - 1\n  - 2\nb"},
    {"  {{ 'var' }}  \n  {# c #}\nz", "  var  \nz"},
    {"text  {% if true %}mid{% endif %}  \n end", "text  mid  \n end"},
    {"{% if true %}  \nkeep spaces before newline{% endif %}", "  \nkeep spaces before newline"},
    {"line1\n\t {% set x = 1 %}\nline2{{ x }}", "line1\nline21"},
    {"{% for i in [1,2] %}{{ i }}\n{% endfor %}", "1\n2\n"},
    {"\n\n  {%+ if true %}plus keeps indent{% endif %}", "\n\n  plus keeps indent"},
    {"{% if true +%}\nplus keeps newline{% endif %}", "\nplus keeps newline"},
    {"{# comment #}\nafter comment\n  {#- c2 -#}  \n  tail", "after commenttail"},
    {"x\r\ny\r{% if true %}\r\nz{% endif %}\n", "x\ny\nz"},
    {"trailing newline dropped\n", "trailing newline dropped"},
    {"two trailing newlines\n\n", "two trailing newlines\n"},
    // ws
    {"a  \n  {%- if true %}b{% endif %}", "ab"},
    {"{% if true -%}  \n\n  c{%- endif %}  d", "c  d"},
    {"x {{- 'y' -}} \n z", "xyz"},
    {"1 {#- comment -#} 2", "12"},
    {"{%- for i in [1,2,3] -%}\n  {{ i }}\n{%- endfor -%}\n!", "123!"},
    {"<{{ ' ' }}>{{- ' ' -}}<{{ '\\n' -}}\n>", "< > <\n>"},
    {"a　{%- if true %}ideographic space stripped too{% endif %}",
     "aideographic space stripped too"},
    // loop
    {"{% for i in ['a','b','c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ "
     "loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}",
     "1032TrueFalse3|2121FalseFalse3|3210FalseTrue3|"},
    {"{% for i in [1,2,3] %}{{ loop.previtem }}-{{ i }}-{{ loop.nextitem }};{% endfor %}",
     "-1-2;1-2-3;2-3-;"},
    {"{% for i in [1,2,3,4] if i is even %}{{ loop.index }}:{{ i }}/{{ loop.length }} {% endfor %}",
     "1:2/2 2:4/2 "},
    {"{% for i in [] %}x{% else %}empty{% endfor %}", "empty"},
    {"{% for i in [1,2] if false %}x{% else %}filtered empty{% endfor %}", "filtered empty"},
    {"{% for a in [1,2] %}{% for b in 'xy' %}{{ a }}{{ b }}{{ loop.index }} {% endfor %}({{ "
     "loop.index }}){% endfor %}",
     "1x1 1y2 (1)2x1 2y2 (2)"},
    {"{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }},{% endfor %}", "a=1,b=2,"},
    {"{% for k in {'z': 1, 'a': 2} %}{{ k }}{% endfor %}", "za"},
    {"{% for x, y in [[1, 2], (3, 4), 'ab'] %}{{ x }}{{ y }} {% endfor %}", "12 34 ab "},
    {"{% for i in range(10) %}{% if i is odd %}{% continue %}{% endif %}{% if i > 6 %}{% break "
     "%}{% endif %}{{ i }}{% endfor %}",
     "0246"},
    {"{% for i in [1,2,3] %}{{ loop.cycle('odd', 'even') }} {% endfor %}", "odd even odd "},
    {"{% for c in 'é€𝄞' %}[{{ c }}]{% endfor %}", "[é][€][𝄞]"},
    // scope
    {"{% set x = 1 %}{% for i in [1,2] %}{{ x }}{% set x = x + 10 %}{{ x }} {% endfor %}{{ x }}",
     "111 111 1"},
    {"{% for i in [1,2] %}{% if i == 1 %}{% set y = 'set' %}{% endif %}[{{ y }}]{% endfor %}[{{ y "
     "}}]",
     "[set][][]"},
    {"{% if true %}{% set z = 'leaks from if' %}{% endif %}{{ z }}", "leaks from if"},
    {"{% for i in [7] %}{% endfor %}[{{ i }}]", "[]"},
    {"{% set ns = namespace(count=0, items=[]) %}{% for i in [1,2,3] %}{% set ns.count = ns.count "
     "+ i %}{% set ns.items = ns.items + [i * 2] %}{% endfor %}{{ ns.count }} {{ ns.items }} {{ "
     "ns.missing is defined }}",
     "6 [2, 4, 6] False"},
    {"{% set ns = namespace(a=1) %}{% for i in [1] %}{% for j in [2] %}{% set ns.a = ns.a + j %}{% "
     "endfor %}{% endfor %}{{ ns.a }} {{ ns }}",
     "3 <Namespace {'a': 3}>"},
    {"{% set ns = namespace({'k': 'v'}, n=2) %}{{ ns.k }}{{ ns['n'] }}", "v2"},
    {"{% set a, b = 'xy' %}{{ b }}{{ a }}{% set c = 1, 2 %}{{ c }}", "yx(1, 2)"},
    {"{% set block %}  inner {{ 1 + 1 }}\n{% endset %}[{{ block }}]", "[  inner 2\n]"},
    {"{% set shout | upper | trim %}  quiet {% endset %}[{{ shout }}]", "[QUIET]"},
    {"{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif "
     "%}{{ add_generation_prompt }}",
     "False"},
    // undef
    {"[{{ missing }}][{{ missing|string }}][{{ missing ~ 'x' }}][{{ missing|length }}][{{ "
     "missing|join(',') }}]",
     "[][][x][0][]"},
    {"{{ missing is defined }} {{ missing is undefined }} {{ missing is none }} {{ not missing }} "
     "{{ missing == missing }} {{ 'a' in missing }}",
     "False True False True True False"},
    {"{{ {'a': 1}.b is defined }} {{ {'a': 1}['b'] is defined }} {{ [1][5] is defined }} {{ "
     "'ab'[9] is defined }}",
     "False False False False"},
    {"{% for x in missing %}never{% endfor %}{% if missing %}no{% else %}falsy{% endif %}",
     "falsy"},
    {"{{ missing|default('fallback') }} {{ none|default('x') }} {{ ''|default('empty', true) }} {{ "
     "missing|d('d') }}",
     "fallback None empty d"},
    {"{{ 'x' if false }}|{{ ('x' if false) is defined }}", "|False"},
    // filter
    {"{{ 'abc'|length }} {{ [1,2,3]|length }} {{ {'a': 1}|length }} {{ 'é€𝄞'|length }} {{ "
     "[1,2]|count }}",
     "3 3 1 3 2"},
    {"{{ {'b': [1, 2.5, none, true, false], 'a': 'é\"\\\\\\n\\t\\u0001'}|tojson }}",
     "{\"b\": [1, 2.5, null, true, false], \"a\": \"é\\\"\\\\\\n\\t\\u0001\"}"},
    {"{{ {'b': 1, 'a': {'c': []}}|tojson(indent=2) }}|{{ [1, {}]|tojson(indent=0) }}|{{ {'b': 1, "
     "'a': 2}|tojson(sort_keys=true) }}",
     "{\n  \"b\": 1,\n  \"a\": {\n    \"c\": []\n  }\n}|[\n1,\n{}\n]|{\"a\": 2, \"b\": 1}"},
    {"{{ 'é𝄞'|tojson(ensure_ascii=true) }} {{ [1, 2]|tojson(separators=(',', ':')) }} {{ "
     "1.0|tojson }} {{ (1e300*1e300)|tojson }} {{ (1, 'a')|tojson }}",
     "\"\\u00e9\\ud834\\udd1e\" [1,2] 1.0 Infinity [1, \"a\"]"},
    {"[{{ '  a b \\n'|trim }}][{{ 'xxaxx'|trim('x') }}][{{ 'a-b-c'|replace('-', '+') }}][{{ "
     "'a-b-c'|replace('-', '+', 1) }}]",
     "[a b][a][a+b+c][a+b-c]"},
    {"{{ [3, 1, 2]|join(', ') }} {{ [1, none, 'a']|join }} {{ [{'n': 'x'}, {'n': 'y'}]|join('/', "
     "attribute='n') }}",
     "3, 1, 2 1Nonea x/y"},
    {"{{ [3, 1, 2]|first }} {{ [3, 1, 2]|last }} {{ 'abc'|first }} {{ 'abc'|last }} {{ {'k': "
     "1}|first }} [{{ []|first }}]",
     "3 2 a c k []"},
    {"{{ 'hello WORLD'|upper }} {{ 'Hello WORLD'|lower }} {{ 'hello world'|capitalize }} {{ 'hello "
     "big-world(x'|title }}",
     "HELLO WORLD hello world Hello world Hello Big-World(X"},
    {"{{ 5|string ~ none|string ~ true|string }} {{ [1, 'a']|string }} {{ ('<b>'|safe) + '<i>' }} "
     "{{ '<a href=\"x\">'|e }}",
     "5NoneTrue [1, 'a'] <b>&lt;i&gt; &lt;a href=&#34;x&#34;&gt;"},
    {"{{ [3, 1, 2]|sort }} {{ ['b', 'A', 'c']|sort }} {{ ['b', 'A', 'c']|sort(reverse=true, "
     "case_sensitive=true) }} {{ [{'n': 2}, {'n': 1}]|sort(attribute='n') }}",
     "[1, 2, 3] ['A', 'b', 'c'] ['c', 'b', 'A'] [{'n': 1}, {'n': 2}]"},
    {"{{ [1, 2, 2, 'a', 'A']|unique|list }} {{ [3, 1, 2]|max }} {{ [3, 1, 2]|min }} {{ ['a', "
     "'B']|max }} {{ [3, 1, 2]|sum }} {{ [{'v': 1.5}, {'v': 2}]|sum(attribute='v') }}",
     "[1, 2, 'a'] 3 1 B 6 3.5"},
    {"{{ [1, 2, 3, 4]|select('odd')|list }} {{ [1, 2, 3, 4]|reject('odd')|list }} {{ [0, 1, '', "
     "'a', none]|select|list }}",
     "[1, 3] [2, 4] [1, 'a']"},
    {"{{ [{'r': 'user'}, {'r': 'tool'}, {'x': 1}]|selectattr('r', 'equalto', 'tool')|list }} {{ "
     "[{'r': 'user'}, {'r': 'tool'}, {'x': 1}]|rejectattr('r', 'defined')|list }} {{ [{'r': 'a'}, "
     "{'r': ''}]|selectattr('r')|list }}",
     "[{'r': 'tool'}] [{'x': 1}] [{'r': 'a'}]"},
    {"{{ [{'a': {'b': 1}}, {'a': {'b': 2}}]|map(attribute='a.b')|list }} {{ ['a', "
     "'b']|map('upper')|list }} {{ [{'x': 1}, {}]|map(attribute='x', default=0)|list }} {{ [[1, "
     "2], [3]]|map('length')|list }}",
     "[1, 2] ['A', 'B'] [1, 0] [2, 1]"},
    {"{{ {'b': 1, 'A': 2}|dictsort }} {{ {'b': 1, 'A': 2}|dictsort(by='value', reverse=true) }} {{ "
     "{'a': 1}|items|list }} {{ missing|items|list }}",
     "[('A', 2), ('b', 1)] [('A', 2), ('b', 1)] [('a', 1)] []"},
    {"{{ 'abc'|list }} {{ (1, 2)|list }} {{ 'abc'|reverse }} {{ [1, 2, 3]|reverse|list }}",
     "['a', 'b', 'c'] [1, 2] cba [3, 2, 1]"},
    {"{{ '42'|int }} {{ '3.9'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ '0x1f'|int(0, 16) }} {{ "
     "3.99|int }} {{ '2.5'|float }} {{ 'x'|float }} {{ 2|float }}",
     "42 3 0 7 31 3 2.5 0.0 2.0"},
    {"{{ 2.5|round }} {{ 3.5|round }} {{ 2.567|round(2) }} {{ 2.675|round(2) }} {{ 2.1|round(0, "
     "'ceil') }} {{ 2.9|round(method='floor') }} {{ 7|round }} {{ -3|abs }} {{ -2.5|abs }}",
     "2.0 4.0 2.57 2.67 3.0 2.0 7 3 2.5"},
    {"{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent('> ', "
     "blank=true) }}",
     "a\n  b\n\n  c|  a\n  b|a\n> \n> b"},
    {"{{ {'a': 1}|attr('items') is defined }} {{ {'a': 1}|attr('a') is defined }}", "True False"},
    // test
    {"{{ 1 is number }}{{ 1.5 is float }}{{ 1 is integer }}{{ true is integer }}{{ true is boolean "
     "}}{{ 'a' is string }}{{ [] is sequence }}{{ {} is mapping }}{{ 'a' is iterable }}{{ none is "
     "none }}{{ 1 is none }}",
     "TrueTrueTrueFalseTrueTrueTrueTrueTrueTrueFalse"},
    {"{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(4) }}{{ 'a' is in "
     "'cat' }}{{ 2 is in [1, 2] }}{{ 'abc' is lower }}{{ 'ABC' is upper }}",
     "TrueTrueTrueFalseTrueTrueTrueTrue"},
    {"{{ 1 is eq 1 }}{{ 1 is equalto 1.0 }}{{ 1 is ne 2 }}{{ 1 is lt 2 }}{{ 2 is le 2 }}{{ 3 is gt "
     "2 }}{{ 3 is ge 4 }}{{ 2 is greaterthan 1 }}{{ 1 is lessthan 0 }}{{ none is sameas none }}{{ "
     "true is true }}{{ 1 is false }}",
     "TrueTrueTrueTrueTrueTrueFalseTrueFalseTrueTrueFalse"},
    {"{{ 'x' is not string }}{{ none is not none }}{{ missing is not defined }}{{ 'tojson' is "
     "filter }}{{ 'odd' is test }}{{ 'nope' is filter }}{{ ('a'|safe) is escaped }}{{ 'a' is "
     "escaped }}",
     "FalseFalseTrueTrueTrueFalseTrueFalse"},
    // method
    {"{{ 'a</think>b</think>c'.split('</think>') }} {{ 'a</think>b</think>c'.split('</think>')[-1] "
     "}} {{ 'a</think>b</think>c'.split('</think>', 1)[1] }}",
     "['a', 'b', 'c'] c b</think>c"},
    {"{{ '  a  b c '.split() }} {{ '  a  b c '.split(none, 1) }} {{ 'a,b,,c'.split(',') }} {{ "
     "'a,b,c'.rsplit(',', 1) }} {{ ' a b '.rsplit(none, 1) }}",
     "['a', 'b', 'c'] ['a', 'b c '] ['a', 'b', '', 'c'] ['a,b', 'c'] [' a', 'b']"},
    {"[{{ '  x  '.strip() }}][{{ '  x  '.lstrip() }}][{{ '  x  '.rstrip() }}][{{ "
     "'\\n\\nx\\n'.strip('\\n') }}][{{ 'xyzyx'.strip('xy') }}]",
     "[x][x  ][  x][x][z]"},
    {"{{ 'hello'.startswith('he') }}{{ 'hello'.startswith(('x', 'h')) }}{{ 'hello'.endswith('lo') "
     "}}{{ 'hello'.endswith('l', 0, 4) }}{{ 'hello'.startswith('l', 2) }}",
     "TrueTrueTrueTrueTrue"},
    {"{{ 'aXbXc'.replace('X', '-') }} {{ 'aXbXc'.replace('X', '-', 1) }} {{ 'abc'.replace('', '.') "
     "}} {{ 'Hello'.upper() }} {{ 'Hello'.lower() }} {{ \"they're here\".title() }} {{ "
     "'hELLO'.capitalize() }}",
     "a-b-c a-bXc .a.b.c. HELLO hello They'Re Here Hello"},
    {"{{ 'hello'.find('l') }} {{ 'hello'.rfind('l') }} {{ 'hello'.find('z') }} {{ 'é€x'.find('x') "
     "}} {{ 'hello'.count('l') }} {{ ', '.join(['a', 'b']) }} {{ 'a\\nb\\r\\nc'.splitlines() }}",
     "2 3 -1 2 2 a, b ['a', 'b', 'c']"},
    {"{{ 'pre_x'.removeprefix('pre_') }} {{ 'x.txt'.removesuffix('.txt') }} {{ ' \\t'.isspace() }} "
     "{{ '123'.isdigit() }} {{ 'abc'.isalpha() }} {{ 'ABC'.isupper() }} {{ 'abc'.islower() }}",
     "x x True True True True True"},
    {"{{ 'hello'[1] }} {{ 'hello'[-1] }} {{ 'hello'[1:3] }} {{ 'hello'[::-1] }} {{ 'hello'[:-2] }} "
     "{{ 'hello'[::2] }} {{ [1, 2, 3, 4][1:] }} {{ [1, 2, 3, 4][-2:] }} {{ [1, 2, 3, 4][::-2] }} "
     "{{ 'é€𝄞x'[1:3] }}",
     "e o el olleh hel hlo [2, 3, 4] [3, 4] [4, 2] €𝄞"},
    {"{{ {'a': 1}.get('a') }} {{ {'a': 1}.get('b') }} {{ {'a': 1}.get('b', 'dflt') }} {{ {'a': 1, "
     "'b': 2}.keys()|list }} {{ {'a': 1, 'b': 2}.values()|list }} {{ {'a': 1}.items()|list }}",
     "1 None dflt ['a', 'b'] [1, 2] [('a', 1)]"},
    {"{{ [1, 2, 1].count(1) }} {{ [1, 2, 1].index(2) }} {{ (1, 2).count(2) }}", "2 1 1"},
    {"{{ 'abc'.nosuchmethod is defined }}", "False"},
    // op
    {"{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ 10 - 2 - 3 }} {{ 7 // 2 "
     "}} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 4 / 2 }} {{ 2 ** -1 }}",
     "7 9 64 4 5 3 -4 1 2 3.5 2.0 0.5"},
    {"{{ 'a' ~ 1 ~ none ~ true }} {{ 'a' + 'b' ~ 'c' }} {{ 1 ~ (2 + 3) }} {{ 'ab' * 2 }} {{ [1] * "
     "3 }} {{ [1] + [2] }} {{ 2 * 'x' }} {{ 1.5 + 1 }} {{ true + 1 }}",
     "a1NoneTrue abc 15 abab [1, 1, 1] [1, 2] xx 2.5 2"},
    {"{{ not 1 == 2 }} {{ not 1 in [1] }} {{ 1 not in [1] }} {{ true and 'yes' }} {{ false or "
     "'fallback' }} {{ 0 or [] or 'last' }} {{ 1 and 0 }} {{ none or none }}",
     "True False False yes fallback last 0 None"},
    {"{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ "
     "'abc' != 'abd' }} {{ 2 >= 2 }} {{ none == none }}",
     "True False True True True True True True"},
    {"{{ 'a' if 1 > 2 else 'b' if 2 > 1 else 'c' }} {{ 'yes' if 'x' in 'xyz' }} {{ ('t' if true "
     "else 'f')|upper }} {{ - 3|abs }} {{ -(3)|abs }}",
     "b yes T 3 3"},
    {"{{ 'ab' 'cd' }} {{ \"dq\" }} {{ 'it\\'s' }} {{ 'tab\\tnl\\nbs\\\\ hex\\x41 uni\\u00e9 "
     "oct\\101' }} {{ 'unknown \\q escape' }}",
     "abcd dq it's tab\tnl\nbs\\ hexA unié octA unknown \\q escape"},
    {"{{ 1_000 + 0x10 + 0o10 + 0b10 }} {{ 1.5e3 }} {{ 1e-5 }} {{ 1e16 }} {{ 123.0 }} {{ 0.1 + 0.2 "
     "}} {{ -0.0 }} {{ 1e300 * 1e300 }}",
     "1026 1500.0 1e-05 1e+16 123.0 0.30000000000000004 -0.0 inf"},
    {"{{ [1, 'two', 3.0, none, true, [], {}, ('t',), {'k': \"it's\"}] }} {{ (1, 2) }} {{ {'a': [1, "
     "{'b': 'c'}]} }}",
     "[1, 'two', 3.0, None, True, [], {}, ('t',), {'k': \"it's\"}] (1, 2) {'a': [1, {'b': 'c'}]}"},
    {"{{ ['\\n', '\\xa0', 'é', \"'\", '\"', '\\'\"', '\\\\'] }}",
     "['\\n', '\\xa0', 'é', \"'\", '\"', '\\'\"', '\\\\']"},
    {"{{ {'a': 1, 'b': 2}['b'] }} {{ {'a': {'b': [10, 20]}}.a.b[1] }} {{ {'a': 1}.a }} {{ [[1, "
     "2]][0][1] }} {{ [1, 2].0 }}",
     "2 20 1 2 1"},
    {"{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ range(3, 0, -1)|list }} {{ dict(a=1, b='x') "
     "}} {{ {1: 'int key', 'k': 2}[1] }}",
     "[0, 1, 2] [1, 3, 5] [3, 2, 1] {'a': 1, 'b': 'x'} int key"},
};

// Templates jinja2 rejects (at parse or render time): ours must throw too.
const Case kErrors[] = {
    // loop
    {"{% for i in none %}{% endfor %}",  // jinja2: TypeError: 'NoneType' object is not iterable
     "'NoneType' object is not iterable"},
    {"{% for i in 42 %}{% endfor %}",  // jinja2: TypeError: 'int' object is not iterable
     "'int' object is not iterable"},
    {"{% for x, y in [[1, 2, 3]] %}{% endfor %}",  // jinja2: ValueError: too many values to unpack
                                                   // (expected 2)
     "too many values to unpack (expected 2)"},
    // scope
    {"{% set x = 1 %}{% set x.attr = 2 %}",  // jinja2: TemplateRuntimeError: cannot assign
                                             // attribute on non-namespace object
     "cannot assign attribute on non-namespace object"},
    // undef
    {"{{ missing.attr }}",  // jinja2: UndefinedError: 'missing' is undefined
     "'missing' is undefined"},
    {"{{ missing['key'] }}",  // jinja2: UndefinedError: 'missing' is undefined
     "'missing' is undefined"},
    {"{{ {'a': 1}.b.c }}",  // jinja2: UndefinedError: 'dict object' has no attribute 'b'
     "'dict object' has no attribute 'b'"},
    {"{{ missing + 'x' }}",  // jinja2: UndefinedError: 'missing' is undefined
     "'missing' is undefined"},
    {"{{ 1 + missing }}",  // jinja2: UndefinedError: 'missing' is undefined
     "'missing' is undefined"},
    {"{{ missing < 1 }}",  // jinja2: UndefinedError: 'missing' is undefined
     "'missing' is undefined"},
    {"{{ missing() }}",  // jinja2: UndefinedError: 'missing' is undefined
     "'missing' is undefined"},
    {"{{ missing|tojson }}",  // jinja2: TypeError: Object of type Undefined is not JSON
                              // serializable
     "Object of type Undefined is not JSON serializable"},
    {"{{ missing|int }}",  // jinja2: UndefinedError: 'missing' is undefined
     "'missing' is undefined"},
    // filter
    {"{{ 5|length }}",  // jinja2: TypeError: object of type 'int' has no len()
     "object of type 'int' has no len()"},
    {"{{ namespace()|tojson }}",  // jinja2: TypeError: Object of type Namespace is not JSON
                                  // serializable
     "Object of type Namespace is not JSON serializable"},
    {"{{ [1, 'a']|sort }}",  // jinja2: TypeError: '<' not supported between instances of 'str' and
                             // 'int'
     "'<' not supported between instances of 'str' and 'int'"},
    {"{{ 'x'|nosuchfilter }}",  // jinja2: TemplateAssertionError: No filter named 'nosuchfilter'.
     "unsupported filter 'nosuchfilter'"},
    {"{{ 'x'|format('y') }}",  // jinja2: TypeError: not all arguments converted during string
                               // formatting
     "unsupported filter 'format'"},
    // test
    {"{{ 'x' is nosuchtest }}",  // jinja2: TemplateAssertionError: No test named 'nosuchtest'.
     "unsupported test 'nosuchtest'"},
    // method
    {"{{ 'x'.split('') }}",  // jinja2: ValueError: empty separator
     "empty separator"},
    // op
    {"{{ 1 + 2 ~ 3 }}",  // jinja2: TypeError: unsupported operand type(s) for +: 'int' and 'str'
     "unsupported operand type(s) for +: 'int' and 'str'"},
    // method
    {"{{ [1, 2].append(3) }}",  // jinja2: SecurityError: access to attribute 'append' of 'list'
                                // object is unsafe.
     "access to attribute 'append' of 'list' object is unsafe."},
    {"{{ {'a': 1}.update({'b': 2}) }}",  // jinja2: SecurityError: access to attribute 'update' of
                                         // 'dict' object is unsafe.
     "access to attribute 'update' of 'dict' object is unsafe."},
    // op
    {"{{ 'a' ~ 1 + 2 }}",  // jinja2: TypeError: can only concatenate str (not "int") to str
     "can only concatenate str (not \"int\") to str"},
    {"{{ 'a' + 1 }}",  // jinja2: TypeError: can only concatenate str (not "int") to str
     "can only concatenate str (not \"int\") to str"},
    {"{{ 1 / 0 }}",  // jinja2: ZeroDivisionError: division by zero
     "division by zero"},
    {"{{ 1 < 'a' }}",  // jinja2: TypeError: '<' not supported between instances of 'int' and 'str'
     "'<' not supported between instances of 'int' and 'str'"},
};

TEST(JinjaSemantics, RendersAsJinja2) {
  for (const Case& c : kRenders) {
    try {
      EXPECT_EQ(render(c.tmpl), c.expected) << "template: " << c.tmpl;
    } catch (const Error& e) {
      ADD_FAILURE() << "template: " << c.tmpl << "\nthrew: " << e.what();
    }
  }
}

TEST(JinjaSemantics, RaisesWhereJinja2Raises) {
  for (const Case& c : kErrors) {
    const std::string message = error_of(c.tmpl);
    EXPECT_EQ(message.rfind("chat template 1:", 0), 0u)
        << "template: " << c.tmpl << "\nmessage: " << message;
    EXPECT_CONTAINS(message, c.expected);
  }
}

// A namespace that holds itself is a reference cycle; the render frees it all the same
// (LeakSanitizer checks this in the sanitizer suite; fuzz_jinja found the leak).
TEST(JinjaSemantics, ANamespaceHoldingItselfIsFreedAfterTheRender) {
  EXPECT_EQ(
      render("{% set ns = namespace(n=0) %}{% set ns.n = ns %}{% set ns.m = [ns, ns] %}{{ 'ok' }}"),
      "ok");
  EXPECT_EQ(render("{% set a = namespace() %}{% set b = namespace(a=a) %}{% set a.b = b %}{{ b.a.b "
                   "is defined }}"),
            "True");
}

TEST(JinjaSemantics, CarriageReturnsBecomeNewlines) {
  EXPECT_EQ(render("x\r\ny\r{% if true %}\r\nz{% endif %}\r\n"), "x\ny\nz");
  EXPECT_EQ(render("{{ 'a\r\nb' }}"), "a\nb");
}

TEST(JinjaSemantics, ContextValues) {
  json ctx = {{"i", 3},
              {"f", 1.0},
              {"big", 1e20},
              {"b", false},
              {"n", nullptr},
              {"s", "é"},
              {"l", {1, "two", nullptr}},
              {"o", {{"k", {{"deep", true}}}}}};
  EXPECT_EQ(
      render(
          "{{ i }} {{ f }} {{ big }} {{ b }} {{ n }} {{ s }} {{ l }} {{ o.k.deep }} {{ o['k'] }}",
          ctx),
      "3 1.0 1e+20 False None é [1, 'two', None] True {'deep': True}");
  EXPECT_EQ(render("{{ i is integer }}{{ f is float }}{{ b is boolean }}{{ l is sequence }}{{ o is "
                   "mapping }}",
                   ctx),
            "TrueTrueTrueTrueTrue");
}

TEST(JinjaSemantics, FloatsPrintAsPython) {
  EXPECT_EQ(render("{{ 1e15 }} {{ 1e16 }} {{ 0.0001 }} {{ 0.00001 }} {{ 123456789012345678.0 }} {{ "
                   "1 / 3 }} {{ 1e22 }} "
                   "{{ 5e-324 }} {{ 1.7976931348623157e308 }} {{ 1e300 * 1e300 }} {{ -1e300 * "
                   "1e300 }} {{ 2.0 ** 0.5 }} "
                   "{{ 100.0 }} {{ 12345.678 }}"),
            "1000000000000000.0 1e+16 0.0001 1e-05 1.2345678901234568e+17 0.3333333333333333 1e+22 "
            "5e-324 "
            "1.7976931348623157e+308 inf -inf 1.4142135623730951 100.0 12345.678");
  EXPECT_EQ(render("{{ [1e15, 0.5, -2.0] }} {{ {'x': 1e-7}|tojson }} {{ (1e300 * 1e300)|tojson }}"),
            "[1000000000000000.0, 0.5, -2.0] {\"x\": 1e-07} Infinity");
}

TEST(JinjaSemantics, ObjectKeyOrderFollowsTheJsonValue) {
  const std::string tmpl = "{{ d|tojson }} {% for k in d %}{{ k }}{% endfor %} {{ d }}";
  nlohmann::ordered_json ordered =
      nlohmann::ordered_json::parse(R"({"d": {"zeta": 1, "alpha": [true, null]}})");
  EXPECT_EQ(ChatTemplate(tmpl).render(ordered),
            "{\"zeta\": 1, \"alpha\": [true, null]} zetaalpha {'zeta': 1, 'alpha': [True, None]}");
  json sorted = json::parse(R"({"d": {"zeta": 1, "alpha": [true, null]}})");
  EXPECT_EQ(ChatTemplate(tmpl).render(sorted),
            "{\"alpha\": [true, null], \"zeta\": 1} alphazeta {'alpha': [True, None], 'zeta': 1}");
}

TEST(JinjaSemantics, ToolSchemasThroughTojson) {
  nlohmann::ordered_json ctx =
      nlohmann::ordered_json::parse(R"({"tools": [{"type": "function", "function":
    {"name": "get_weather", "description": "Météo", "parameters": {"type": "object",
     "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]})");
  EXPECT_EQ(ChatTemplate(
                "{% for t in tools %}{{ t.function|tojson }}\n{{ t|tojson(indent=1) }}{% endfor %}")
                .render(ctx),
            "{\"name\": \"get_weather\", \"description\": \"Météo\", \"parameters\": {\"type\": "
            "\"object\", "
            "\"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}\n"
            "{\n \"type\": \"function\",\n \"function\": {\n  \"name\": \"get_weather\",\n  "
            "\"description\": "
            "\"Météo\",\n  \"parameters\": {\n   \"type\": \"object\",\n   \"properties\": {\n    "
            "\"city\": {\n"
            "     \"type\": \"string\"\n    }\n   },\n   \"required\": [\n    \"city\"\n   ]\n  "
            "}\n }\n}");
}

TEST(JinjaSemantics, RaiseExceptionCarriesTheMessage) {
  const std::string tmpl =
      "{% for m in messages %}\n"
      "{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}\n"
      "  {{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') "
      "}}\n"
      "{% endif %}{% endfor %}";
  json ok = {{"messages", {{{"role", "user"}}, {{"role", "assistant"}}}}};
  EXPECT_EQ(render(tmpl, ok), "");
  json bad = {{"messages", {{{"role", "user"}}, {{"role", "user"}}}}};
  const std::string message = error_of(tmpl, bad);
  EXPECT_CONTAINS(
      message,
      "raise_exception: Conversation roles must alternate user/assistant/user/assistant/...");
  EXPECT_CONTAINS(message, "chat template 3:");
}

TEST(JinjaSemantics, ErrorsNameLineAndColumn) {
  EXPECT_CONTAINS(error_of("a\n{% if true %}\n  {{ 1 + 'x' }}\n{% endif %}"),
                  "chat template 3:8: unsupported operand");
  EXPECT_CONTAINS(error_of("héllo {{ x.y.z }}", {{"x", json::object()}}),
                  "chat template 1:13: 'dict object' has no attribute 'y'");
  EXPECT_CONTAINS(error_of("\n\n   {% for %}"), "chat template 3:11: expected a name");
  EXPECT_CONTAINS(error_of("{% if true %}\nno end"),
                  "unexpected end of template, expected 'elif' or 'else' or 'endif'");
  EXPECT_CONTAINS(error_of("{% endif %}"), "chat template 1:4: unexpected 'endif'");
  EXPECT_CONTAINS(error_of("{% for x in y %}{% endif %}"), "unexpected 'endif'");
  EXPECT_CONTAINS(error_of("{{ 1 + }}"), "chat template 1:8: unexpected end of print statement");
  EXPECT_CONTAINS(error_of("{{ 'open }}"), "chat template 1:4: unterminated string literal");
  EXPECT_CONTAINS(error_of("ok\n{# never closed"), "chat template 2:1: missing end of comment tag");
  EXPECT_CONTAINS(error_of("{{ [1, 2 }}"), "unexpected '}', expected ']'");
  EXPECT_CONTAINS(error_of("{{ x ? y }}"), "unexpected character '?'");
  EXPECT_CONTAINS(error_of("{{ 99999999999999999999 }}"), "integer literal too large");
  EXPECT_CONTAINS(error_of("{% break %}"), "'break' outside of a for loop");
}

TEST(JinjaSemantics, UnsupportedConstructsAreNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {"{% include 'other.jinja' %}", "1:4: unsupported tag 'include'"},
      {"{% import 'macros.jinja' as m %}", "unsupported tag 'import'"},
      {"{% from 'macros.jinja' import m %}", "unsupported tag 'from'"},
      {"{% extends 'base.jinja' %}", "unsupported tag 'extends'"},
      {"{% block body %}{% endblock %}", "unsupported tag 'block'"},
      {"{% macro m(x) %}{{ x }}{% endmacro %}", "unsupported tag 'macro'"},
      {"{% call m() %}{% endcall %}", "unsupported tag 'call'"},
      {"{% filter upper %}x{% endfilter %}", "unsupported tag 'filter'"},
      {"{% with a = 1 %}{{ a }}{% endwith %}", "unsupported tag 'with'"},
      {"{% autoescape true %}{% endautoescape %}", "unsupported tag 'autoescape'"},
      {"x\n  {%- raw %}{{ not parsed }}{% endraw %}", "2:3: unsupported tag 'raw'"},
      {"{% do x.append(1) %}", "unsupported tag 'do'"},
      {"{% frobnicate %}", "unknown tag 'frobnicate'"},
      {"{% for x in y recursive %}{% endfor %}", "unsupported recursive for loop"},
      {"{{ 'x'|wordwrap }}", "1:8: unsupported filter 'wordwrap'"},
      {"{{ x is escaped_or_not }}", "unsupported test 'escaped_or_not'"},
      {"{{ f(*args) }}", "unsupported '*' argument unpacking"},
      {"{{ 'x'.format(1) }}", "unsupported method 'str.format'"},
      {"{{ 'x'.zfill(3) }}", "unsupported method 'str.zfill'"},
      {"{{ '%s' % 1 }}", "unsupported string formatting"},
      {"{{ cycler('a')  }}", "unsupported function 'cycler'"},
      {"{{ strftime_now('%Y') }}", "unsupported function 'strftime_now'"},
      {"{{ 'a\\N{BULLET}' }}", "unsupported \\N{...} escape"},
      {"{% for x in [1] %}{{ loop.changed(x) }}{% endfor %}", "unsupported 'loop.changed'"},
  };
  for (const auto& [tmpl, needle] : cases) EXPECT_CONTAINS(error_of(tmpl), needle);
}

TEST(JinjaLimits, RunawayLoopStops) {
  const auto start = std::chrono::steady_clock::now();
  EXPECT_CONTAINS(
      error_of("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"),
      "loop iterations exceed the limit of 1000000");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  // Exactly at the limit is fine.
  EXPECT_EQ(
      render("{% for i in range(1000) %}{% for j in range(999) %}{% endfor %}{% endfor %}done"),
      "done");
}

TEST(JinjaLimits, HugeOutputStops) {
  EXPECT_CONTAINS(error_of("{% for i in range(100000) %}{{ 'xxxxxxxxxxxxxxxxxxxx' }}{% endfor %}"),
                  "rendered output exceeds the limit of 1048576 bytes");
  EXPECT_CONTAINS(error_of("{{ 'x' * 2000000 }}"), "string repetition exceeds the limit");
  EXPECT_CONTAINS(error_of("{% set ns = namespace(s='x') %}{% for i in range(30) %}{% set ns.s = "
                           "ns.s + ns.s %}{% endfor %}"),
                  "exceeds the limit of 1048576 bytes");
  EXPECT_CONTAINS(error_of("{{ [0] * 10000000 }}"), "list repetition exceeds the limit");
  EXPECT_CONTAINS(error_of("{{ range(200000)|length }}"), "range too big");
  EXPECT_EQ(render("{{ range(100000)|length }}"), "100000");
}

TEST(JinjaLimits, HeavyWorkStops) {
  const auto start = std::chrono::steady_clock::now();
  EXPECT_CONTAINS(error_of("{% set big = range(100000)|list * 10 %}{% for i in range(100000) %}"
                           "{% set s = big|sort %}{% endfor %}"),
                  "work limit");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
}

TEST(JinjaLimits, DeepNestingIsRejected) {
  EXPECT_CONTAINS(error_of("{{ " + std::string(1000, '(') + "1" + std::string(1000, ')') + " }}"),
                  "nested deeper than 128 levels");
  std::string ifs;
  for (int k = 0; k < 500; ++k) ifs += "{% if true %}";
  EXPECT_CONTAINS(error_of(ifs), "nested deeper than 128 levels");
  EXPECT_CONTAINS(error_of("{{ " + std::string(1000, '-') + "1 }}"),
                  "nested deeper than 128 levels");
  // Long left-deep chains nest as deeply as parentheses do.
  std::string sum = "{{ 1", attrs = "{{ x", filters = "{{ x", ands = "{{ x";
  for (int k = 0; k < 100000; ++k) {
    sum += " + 1";
    attrs += ".a";
    filters += "|trim";
    ands += " and x";
  }
  for (const std::string& t : {sum, attrs, filters, ands})
    EXPECT_CONTAINS(error_of(t + " }}"), "nested deeper than 128 levels");
  std::string fine = "{{ 0";
  for (int k = 0; k < 100; ++k) fine += " + 1";
  EXPECT_EQ(render(fine + " }}"), "100");
  json deep = json::parse("{\"d\": " + std::string(5000, '[') + std::string(5000, ']') + "}");
  EXPECT_CONTAINS(error_of("{{ d }}", deep), "values nested deeper than 256 levels");
}

TEST(JinjaLimits, CustomLimits) {
  ChatTemplate::Limits limits;
  limits.max_output_bytes = 8;
  limits.max_loop_iterations = 3;
  ChatTemplate out("{{ 'hello world' }}", limits);
  EXPECT_THROW(out.render(json::object()), Error);
  ChatTemplate loop("{% for i in range(4) %}{% endfor %}", limits);
  EXPECT_THROW(loop.render(json::object()), Error);
  ChatTemplate small("{% for i in range(3) %}{{ i }}{% endfor %}", limits);
  EXPECT_EQ(small.render(json::object()), "012");
  EXPECT_EQ(small.render(json::object()), "012");  // limits are per render
}

TEST(ChatTemplateApi, ContextMustBeAnObject) {
  ChatTemplate t("x");
  EXPECT_THROW(t.render(json::array()), Error);
  EXPECT_EQ(t.render(json::object()), "x");
}

TEST(ChatTemplateApi, MovableAndReusableAcrossThreads) {
  ChatTemplate a(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + m %}{% endfor %}{{ "
      "ns.n }}");
  ChatTemplate t = std::move(a);
  std::vector<std::string> results(8);
  std::vector<std::thread> threads;
  for (size_t k = 0; k < results.size(); ++k) {
    threads.emplace_back([&, k] {
      json ctx = {{"messages", json::array()}};
      for (size_t m = 0; m <= k * 100; ++m) ctx["messages"].push_back(1);
      results[k] = t.render(ctx);
    });
  }
  for (auto& th : threads) th.join();
  for (size_t k = 0; k < results.size(); ++k) EXPECT_EQ(results[k], std::to_string(k * 100 + 1));
}

}  // namespace
}  // namespace dsinfer::jinja_semantics_test
