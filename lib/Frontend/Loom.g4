// Loom.g4 - the grammar of the Loom language (docs/language.md explains it).
//
// Newlines carry no meaning: statements end where the next one begins, and a
// ';' may separate them. Semantic rules (names, shapes, shardings) are checked
// after parsing, on the AST.

grammar Loom;

file : topDecl* EOF ;

topDecl
  : importDecl
  | meshDecl
  | constDecl
  | blockDecl
  | trainDecl
  ;

importDecl : IMPORT STRING ';'? ;

meshDecl : MESH ID '=' '[' meshAxis (',' meshAxis)* ','? ']' ';'? ;
meshAxis : ID ':' expr ;

constDecl : CONST constItem (',' constItem)* ';'? ;
constItem : ID '=' expr ;

// `block` and `model` share one shape; a model is the program's entry.
blockDecl : kind=(BLOCK | MODEL) ID '(' (arg (',' arg)*)? ')' '->' results body ;
arg : ID ':' tensorType ;
results : result | '(' result (',' result)* ')' ;
result : (ID ':')? tensorType ;
body : '{' stmt* '}' ;

tensorType : DTYPE ('[' (dim (',' dim)*)? ']')? ;

// A dimension size with optional mesh axes: `D`, `B:dp`, `B:(dp,tp)`, `D:_`,
// `S:tp?` (open: the compiler may add axes), `B:dp p1` (priority).
dim : expr (':' axisList open='?'? priority=ID?)? ;
axisList : ID | '(' ID (',' ID)* ')' ;

stmt
  : PARAM ID ':' tensorType '=' initializer ';'?                           # paramStmt
  | targets '=' REPEAT count=expr (AS name=ID)? '{' stmt* expr (',' expr)* '}' ';'? # repeatStmt
  | targets '=' expr ';'?                                                   # assignStmt
  | RETURN expr (',' expr)* ';'?                                            # returnStmt
  ;
targets : ID (',' ID)* ;
initializer : ID ('(' (expr (',' expr)*)? ')')? ;

expr
  : primary                                  # primaryExpr
  | '-' expr                                 # negExpr
  | expr op=('*' | '/' | '@') expr           # mulExpr
  | expr op=('+' | '-') expr                 # addExpr
  ;

primary
  : INT                                               # intLit
  | FLOAT                                             # floatLit
  | STRING                                            # stringLit
  | (TRUE | FALSE)                                    # boolLit
  | DTYPE                                             # dtypeLit
  | ID (args=callArgs (AS name=ID)?)?                  # nameOrCallExpr
  | '(' expr ')'                                      # parenExpr
  | '(' expr ',' (expr (',' expr)*)? ')'              # tupleExpr
  | '[' (dim (',' dim)*)? ']'                         # listExpr
  // Not a value: parsed only to say so (repeatStmt wins where both match).
  | REPEAT expr (AS ID)? '{' stmt* expr (',' expr)* '}' # misplacedRepeat
  ;
// Its own rule so that, when a call's arguments do not parse, the parser can
// re-read them from the '(' and point at the real mistake.
callArgs : '(' (callArg (',' callArg)*)? ')' ;
callArg : (ID '=')? expr ;

trainDecl : TRAIN ID '{' (trainClause (',' | ';')?)* '}' ;
trainClause
  : STAGE expr ':' '[' stageRef (',' stageRef)* ']'   # stageClause
  | key=ID trainValue? (OVER axisList)?               # keyClause
  ;
trainValue : expr ;
stageRef : ID ('[' expr ':' expr ']')? ;

IMPORT : 'import' ;
MESH : 'mesh' ;
CONST : 'const' ;
BLOCK : 'block' ;
MODEL : 'model' ;
PARAM : 'param' ;
RETURN : 'return' ;
REPEAT : 'repeat' ;
AS : 'as' ;
TRAIN : 'train' ;
OVER : 'over' ;
STAGE : 'stage' ;
TRUE : 'true' ;
FALSE : 'false' ;
DTYPE : 'f32' | 'bf16' | 'f16' | 'i32' | 'i64' ;

FLOAT
  : [0-9]+ '.' [0-9]* EXPONENT?
  | '.' [0-9]+ EXPONENT?
  | [0-9]+ EXPONENT
  ;
INT : [0-9]+ ;
// A name may start with digits when a letter follows (`1f1b`).
ID : [a-zA-Z_] [a-zA-Z_0-9]* | [0-9]+ [a-zA-Z_] [a-zA-Z_0-9]* ;
STRING : '"' (~["\\\r\n] | '\\' ~[\r\n])* '"' ;
fragment EXPONENT : [eE] [+-]? [0-9]+ ;

LINE_COMMENT : '//' ~[\r\n]* -> skip ;
BLOCK_COMMENT : '/*' .*? '*/' -> skip ;
WS : [ \t\r\n]+ -> skip ;
// Anything else becomes one token that the parser rejects with a clear message.
UNKNOWN_CHAR : . ;
